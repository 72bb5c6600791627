/*
 * frame_walk: the batch headers of stored bytes, walked at memory speed.
 *
 * A batch's base offset and length lie outside its CRC. The disk store checks
 * a partitionlet's CRCs once and serves those bytes unchecked afterwards; a bit
 * flipped since in a length (bit rot under a running broker) had the batch and
 * every one after it in a read handed out cut at the wrong places, and
 * librdkafka took record bytes for an offset and skipped the rest of the
 * partition. So every read of checked bytes walks their headers (two fields
 * each, no CRC). In Python that cost about 3 ms per MiB of one-record batches,
 * 20 to 40 times the read itself; storage/disk/partitionlet.py keeps the Python
 * walk, the reference, for where this was not built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define HEADER_SIZE 61   /* a record batch header, v2 */
#define LOG_OVERHEAD 12  /* base offset and length precede what the length counts */

static inline int64_t be64(const uint8_t *b)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | b[i];
    return (int64_t)v;
}

static inline int32_t be32(const uint8_t *b)
{
    return (int32_t)(((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | (uint32_t)b[3]);
}

/*
 * frame_walk(buf, pos, expected) -> (pos, expected, base): from `pos`, while each header frames a whole
 * magic-2 batch inside buf whose base offset is `expected` (-1: whatever the first one says; the next is
 * its last offset + 1). Stops at the end (pos == len(buf), base -1), at a batch whose base is not the one
 * expected (its base returned: the caller decides whether the jump is over a quarantined range), or where
 * the bytes frame no batch (base -1).
 */
static PyObject *frame_walk(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos;
    long long expected;
    if (!PyArg_ParseTuple(args, "y*nL", &view, &pos, &expected))
        return NULL;
    const uint8_t *buf = (const uint8_t *)view.buf;
    Py_ssize_t len = view.len;
    long long base = -1;
    while (pos >= 0 && pos < len) {
        if (len - pos < HEADER_SIZE)
            break;
        int64_t first = be64(buf + pos);
        int32_t length = be32(buf + pos + 8);
        if (buf[pos + 16] != 2 || length < HEADER_SIZE - LOG_OVERHEAD || (Py_ssize_t)length > len - pos - LOG_OVERHEAD)
            break;
        if (expected >= 0 && first != expected) {
            base = first;
            break;
        }
        expected = first + be32(buf + pos + 23) + 1;  /* lastOffsetDelta */
        pos += LOG_OVERHEAD + (Py_ssize_t)length;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(nLL)", pos, expected, base);
}

static PyMethodDef methods[] = {
    {"frame_walk", frame_walk, METH_VARARGS,
     "frame_walk(buf, pos, expected) -> (pos, expected, base); see storage/disk/partitionlet.py"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_frame_walk", NULL, -1, methods};

PyMODINIT_FUNC PyInit__frame_walk(void) { return PyModule_Create(&module); }
