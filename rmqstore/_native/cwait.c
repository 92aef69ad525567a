/* rmqstore._native._cwait: the group commit's hand-off to its waiting writers, without the GIL.
 *
 * A SYNC_FLUSH put waits until the group commit service has flushed past its record
 * (rmqstore.engine.flush.GroupCommitRequest).  On the pure path each waiting writer blocks on its
 * own threading.Lock, and the service releases the locks one by one -- each release a futex
 * wake made holding the GIL, a fifth of the GIL's time with 8 writers (bench/README.md).
 *
 * Here a service has one Gate (a mutex and a condition variable) and each request one Latch
 * on it:
 *
 *   - Latch.set() marks the request answered (under the gate's mutex: no system call unless a
 *     writer is checking at that instant);
 *   - Gate.broadcast() wakes every writer at once, once per flush round (the service keeps the
 *     GIL: letting it go there would put the service behind every writer it just woke);
 *   - Latch.wait(timeout) checks and sleeps with the GIL released; a writer woken for another
 *     writer's latch goes back to sleep without touching the GIL.
 *
 * What the request answered (PUT_OK, FLUSH_DISK_TIMEOUT) stays in the Python request: the
 * latch carries only "answered", written before the broadcast that publishes it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <time.h>

typedef struct {
    PyObject_HEAD
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ready;
} Gate;

typedef struct {
    PyObject_HEAD
    Gate *gate;
    int done;
} Latch;

static PyTypeObject GateType, LatchType;

/* -- Gate -------------------------------------------------------------------------------------- */

static PyObject *Gate_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kw != NULL && PyDict_GET_SIZE(kw) != 0)) {
        PyErr_SetString(PyExc_TypeError, "Gate() takes no arguments");
        return NULL;
    }
    Gate *self = (Gate *)tp->tp_alloc(tp, 0);
    if (self == NULL)
        return NULL;
    pthread_condattr_t attr;
    if (pthread_mutex_init(&self->mu, NULL) != 0) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    if (pthread_condattr_init(&attr) != 0 || pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&self->cv, &attr) != 0) {
        pthread_mutex_destroy(&self->mu);
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    pthread_condattr_destroy(&attr);
    self->ready = 1;
    return (PyObject *)self;
}

static void Gate_dealloc(Gate *self)
{
    /* no latch outlives its gate (each holds a reference): nobody waits here any more */
    if (self->ready) {
        pthread_cond_destroy(&self->cv);
        pthread_mutex_destroy(&self->mu);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Gate_broadcast(Gate *self, PyObject *Py_UNUSED(ignored))
{
    /* the GIL is kept: letting it go here would hand it to a woken writer, and the service
     * would queue behind all of them before its next flush (the mutex is only ever held for
     * a writer's check, so this does not wait) */
    pthread_mutex_lock(&self->mu);
    pthread_cond_broadcast(&self->cv);
    pthread_mutex_unlock(&self->mu);
    Py_RETURN_NONE;
}

static PyObject *Gate_latch(Gate *self, PyObject *Py_UNUSED(ignored))
{
    return PyObject_CallOneArg((PyObject *)&LatchType, (PyObject *)self);
}

static PyMethodDef Gate_methods[] = {
    {"latch", (PyCFunction)Gate_latch, METH_NOARGS, "A new Latch on this gate (one request's)."},
    {"broadcast", (PyCFunction)Gate_broadcast, METH_NOARGS,
     "Wake every writer waiting on a latch of this gate (the GIL kept); the answered ones return."},
    {NULL},
};

static PyTypeObject GateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rmqstore._native._cwait.Gate",
    .tp_basicsize = sizeof(Gate),
    .tp_dealloc = (destructor)Gate_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A group commit service's mutex and condition variable: its requests' latches wait on it.",
    .tp_methods = Gate_methods,
    .tp_new = Gate_new,
};

/* -- Latch ------------------------------------------------------------------------------------- */

static PyObject *Latch_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
    Gate *gate;
    if (kw != NULL && PyDict_GET_SIZE(kw) != 0) {
        PyErr_SetString(PyExc_TypeError, "Latch() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!:Latch", &GateType, &gate))
        return NULL;
    Latch *self = (Latch *)tp->tp_alloc(tp, 0);
    if (self == NULL)
        return NULL;
    self->gate = (Gate *)Py_NewRef(gate);
    return (PyObject *)self;
}

static void Latch_dealloc(Latch *self)
{
    Py_XDECREF(self->gate);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Latch_set(Latch *self, PyObject *Py_UNUSED(ignored))
{
    /* the mutex is held only by a writer checking its flag: the GIL is kept for this moment */
    pthread_mutex_lock(&self->gate->mu);
    self->done = 1;
    pthread_mutex_unlock(&self->gate->mu);
    Py_RETURN_NONE;
}

static PyObject *Latch_wait(Latch *self, PyObject *arg)
{
    double timeout = PyFloat_AsDouble(arg);
    if (timeout == -1.0 && PyErr_Occurred())
        return NULL;
    if (!(timeout >= 0) || !isfinite(timeout)) {
        PyErr_Format(PyExc_ValueError, "a latch's timeout must be finite seconds >= 0, got %R", arg);
        return NULL;
    }
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    double whole = floor(timeout);
    until.tv_sec += (time_t)whole;
    until.tv_nsec += (long)((timeout - whole) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec += 1;
        until.tv_nsec -= 1000000000L;
    }
    int done;
    Gate *g = self->gate;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&g->mu);
    while (!self->done) {
        if (pthread_cond_timedwait(&g->cv, &g->mu, &until) == ETIMEDOUT)
            break;
    }
    done = self->done;
    pthread_mutex_unlock(&g->mu);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(done);
}

static PyObject *Latch_is_set(Latch *self, void *Py_UNUSED(closure))
{
    pthread_mutex_lock(&self->gate->mu);
    int done = self->done;
    pthread_mutex_unlock(&self->gate->mu);
    return PyBool_FromLong(done);
}

static PyMethodDef Latch_methods[] = {
    {"set", (PyCFunction)Latch_set, METH_NOARGS,
     "Mark the request answered; its writer returns at the gate's next broadcast."},
    {"wait", (PyCFunction)Latch_wait, METH_O,
     "Wait up to ``timeout`` seconds (the GIL released) for set() and a broadcast; True when set."},
    {NULL},
};

static PyGetSetDef Latch_getset[] = {
    {"is_set", (getter)Latch_is_set, NULL, "True once set() was called.", NULL},
    {NULL},
};

static PyMemberDef Latch_members[] = {
    {"gate", T_OBJECT_EX, offsetof(Latch, gate), READONLY, "The gate whose broadcast wakes this latch's writer."},
    {NULL},
};

static PyTypeObject LatchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rmqstore._native._cwait.Latch",
    .tp_basicsize = sizeof(Latch),
    .tp_dealloc = (destructor)Latch_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Latch(gate): one group-commit request's 'answered' flag, waited on without the GIL.",
    .tp_methods = Latch_methods,
    .tp_getset = Latch_getset,
    .tp_members = Latch_members,
    .tp_new = Latch_new,
};

/* -- the module -------------------------------------------------------------------------------- */

static int cwait_exec(PyObject *m)
{
    if (PyType_Ready(&GateType) < 0 || PyType_Ready(&LatchType) < 0)
        return -1;
    if (PyModule_AddObjectRef(m, "Gate", (PyObject *)&GateType) < 0 ||
        PyModule_AddObjectRef(m, "Latch", (PyObject *)&LatchType) < 0)
        return -1;
    return 0;
}

static PyModuleDef_Slot cwait_slots[] = {
    {Py_mod_exec, cwait_exec},
    {0, NULL},
};

static struct PyModuleDef cwait_module = {
    PyModuleDef_HEAD_INIT, "rmqstore._native._cwait", "The group commit's hand-off to its waiting writers, without the GIL.",
    0, NULL, cwait_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__cwait(void)
{
    return PyModuleDef_Init(&cwait_module);
}
