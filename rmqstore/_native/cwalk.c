/* rmqstore._cwalk: the segment walk with its body CRC, compiled (see rmqstore/native.py).
 *
 * Exposes crc32() (zlib's signature) and LAYOUT, the record positions this C code uses,
 * which tests/unit/test_native_crc.py compares with the layout table.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "crc32.h"
#include "record.h"

static PyObject *cwalk_crc32(PyObject *self, PyObject *args)
{
    Py_buffer view;
    unsigned int value = 0;
    if (!PyArg_ParseTuple(args, "y*|I:crc32", &view, &value))
        return NULL;
    uint32_t crc;
    if (view.len > 65536) {
        Py_BEGIN_ALLOW_THREADS
        crc = rmq_crc32(value, view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
    } else {
        crc = rmq_crc32(value, view.buf, (size_t)view.len);
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

static PyMethodDef cwalk_methods[] = {
    {"crc32", cwalk_crc32, METH_VARARGS,
     "crc32(data, value=0) -> int: zlib's CRC-32 of a bytes-like object, continuing `value`."},
    {NULL, NULL, 0, NULL},
};

static int cwalk_exec(PyObject *m)
{
    rmq_crc_init();
    PyObject *layout = Py_BuildValue(
        "{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}",
        "TOTALSIZE", RMQ_POS_TOTALSIZE, "MAGICCODE", RMQ_POS_MAGIC, "BODYCRC", RMQ_POS_BODYCRC,
        "QUEUEID", RMQ_POS_QUEUEID, "FLAG", RMQ_POS_FLAG, "QUEUEOFFSET", RMQ_POS_QUEUEOFFSET,
        "PHYSICALOFFSET", RMQ_POS_PHYSICALOFFSET, "SYSFLAG", RMQ_POS_SYSFLAG,
        "BORNTIMESTAMP", RMQ_POS_BORNTIMESTAMP, "BORNHOST", RMQ_POS_BORNHOST,
        "STORETIMESTAMP", rmq_pos_store_timestamp(0), "STORETIMESTAMP_V6", rmq_pos_store_timestamp(RMQ_BORNHOST_V6_FLAG),
        "BODYLENGTH", rmq_pos_body_length(0));
    if (layout == NULL || PyModule_AddObject(m, "LAYOUT", layout) < 0) {
        Py_XDECREF(layout);
        return -1;
    }
    if (PyModule_AddStringConstant(m, "CRC_KERNEL", rmq_crc_use_clmul ? "pclmulqdq" : "slice-by-8") < 0)
        return -1;
    return 0;
}

static PyModuleDef_Slot cwalk_slots[] = {
    {Py_mod_exec, cwalk_exec},
    {0, NULL},
};

static struct PyModuleDef cwalk_module = {
    PyModuleDef_HEAD_INIT, "rmqstore._cwalk", "The segment walk with its body CRC, compiled.", 0,
    cwalk_methods, cwalk_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__cwalk(void)
{
    return PyModuleDef_Init(&cwalk_module);
}
