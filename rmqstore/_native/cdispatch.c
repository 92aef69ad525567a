/* rmqstore._cdispatch: dispatch of a run of records to consume queues and index, compiled (see rmqstore/native.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "crc32.h"
#include "record.h"

static PyMethodDef cdispatch_methods[] = {
    {NULL, NULL, 0, NULL},
};

static int cdispatch_exec(PyObject *m)
{
    rmq_crc_init();
    return 0;
}

static PyModuleDef_Slot cdispatch_slots[] = {
    {Py_mod_exec, cdispatch_exec},
    {0, NULL},
};

static struct PyModuleDef cdispatch_module = {
    PyModuleDef_HEAD_INIT, "rmqstore._cdispatch", "dispatch of a run of records to consume queues and index, compiled", 0,
    cdispatch_methods, cdispatch_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__cdispatch(void)
{
    return PyModuleDef_Init(&cdispatch_module);
}
