/* rmqstore._cput: record encode + append, compiled (see rmqstore/native.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "crc32.h"
#include "record.h"

static PyMethodDef cput_methods[] = {
    {NULL, NULL, 0, NULL},
};

static int cput_exec(PyObject *m)
{
    rmq_crc_init();
    return 0;
}

static PyModuleDef_Slot cput_slots[] = {
    {Py_mod_exec, cput_exec},
    {0, NULL},
};

static struct PyModuleDef cput_module = {
    PyModuleDef_HEAD_INIT, "rmqstore._cput", "record encode + append, compiled", 0,
    cput_methods, cput_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__cput(void)
{
    return PyModuleDef_Init(&cput_module);
}
