/* The ONNX file's nesting, bounded before protobuf-c decodes it.
 * protobuf-c's unpack recurses once per nested message, and the schema has
 * cycles (a node's attribute holds a graph of nodes; a type's sequence,
 * map or optional holds a type), so a 30 KB file of graphs 3,000 deep
 * overflows the stack. This walks the wire format without recursion, an
 * explicit stack of at most OX_MAX_NESTING messages, descending only into
 * the fields of those cycles; every other message field (a tensor, a
 * shape, a string map) nests at most 3 levels further, so protobuf-c's
 * depth is the walk's plus 3. Bytes that are not well-formed protobuf are
 * left to protobuf-c to refuse: it decodes in the same order and fails at
 * the same place, never deeper than the walk went. */
#include "onnx_internal.h"

#include <stddef.h>
#include <stdint.h>

/* The messages of the cycles, and those that lead into them. */
typedef enum ow_msg {
    OW_MODEL, OW_GRAPH, OW_NODE, OW_ATTRIBUTE, OW_FUNCTION, OW_TRAINING, OW_VALUE_INFO,
    OW_TYPE, OW_TYPE_ELEM, /* TypeProto.Sequence and .Optional: elem_type = 1 */
    OW_TYPE_MAP
} ow_msg;

/* The message fields followed, by their number in onnx.proto (1.12's: a
 * field that schema lacks protobuf-c keeps as bytes, undecoded). */
static const struct {
    ow_msg msg;
    uint32_t field;
    ow_msg child;
} ow_fields[] = {
    {OW_MODEL, 7, OW_GRAPH},          {OW_MODEL, 20, OW_TRAINING},
    {OW_MODEL, 25, OW_FUNCTION},      {OW_GRAPH, 1, OW_NODE},
    {OW_GRAPH, 11, OW_VALUE_INFO},    {OW_GRAPH, 12, OW_VALUE_INFO},
    {OW_GRAPH, 13, OW_VALUE_INFO},    {OW_NODE, 5, OW_ATTRIBUTE},
    {OW_ATTRIBUTE, 6, OW_GRAPH},      {OW_ATTRIBUTE, 11, OW_GRAPH},
    {OW_ATTRIBUTE, 14, OW_TYPE},      {OW_ATTRIBUTE, 15, OW_TYPE},
    {OW_FUNCTION, 7, OW_NODE},        {OW_TRAINING, 1, OW_GRAPH},
    {OW_TRAINING, 2, OW_GRAPH},       {OW_VALUE_INFO, 2, OW_TYPE},
    {OW_TYPE, 4, OW_TYPE_ELEM},       {OW_TYPE, 5, OW_TYPE_MAP},
    {OW_TYPE, 9, OW_TYPE_ELEM},       {OW_TYPE_ELEM, 1, OW_TYPE},
    {OW_TYPE_MAP, 2, OW_TYPE},
};

/* The message type field f of a msg holds, or -1: not followed. */
static int ow_child(ow_msg msg, uint32_t f)
{
    for (size_t i = 0; i < sizeof ow_fields / sizeof ow_fields[0]; i++)
        if (ow_fields[i].msg == msg && ow_fields[i].field == f)
            return (int)ow_fields[i].child;
    return -1;
}

/* A varint at *pos before end into *v; 0 if there is none. */
static int ow_varint(const uint8_t *b, size_t end, size_t *pos, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64 && *pos < end; shift += 7) {
        uint8_t c = b[(*pos)++];
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return 1;
        }
    }
    return 0;
}

st_status ox_wire_check(const char *path, const uint8_t *b, size_t len, st_error *err)
{
    struct {
        size_t end;
        ow_msg msg;
    } stack[OX_MAX_NESTING];
    int depth = 1;
    size_t pos = 0;
    stack[0].end = len;
    stack[0].msg = OW_MODEL;
    while (depth > 0) {
        size_t end = stack[depth - 1].end;
        if (pos >= end) {
            depth--;
            continue;
        }
        uint64_t tag, n;
        if (!ow_varint(b, end, &pos, &tag))
            return ST_OK; /* not protobuf: protobuf-c says so */
        switch (tag & 7) {
        case 0: /* varint */
            if (!ow_varint(b, end, &pos, &n))
                return ST_OK;
            break;
        case 1: /* 64 bits */
            pos += 8;
            break;
        case 5: /* 32 bits */
            pos += 4;
            break;
        case 2: { /* length-delimited: bytes, a string or a message */
            if (!ow_varint(b, end, &pos, &n) || n > end - pos)
                return ST_OK;
            int child = ow_child(stack[depth - 1].msg, (uint32_t)(tag >> 3));
            if (child < 0) {
                pos += (size_t)n;
                break;
            }
            if (depth == OX_MAX_NESTING)
                return st_fail(err, ST_EINPUT, "%s: at byte %zu, messages nested deeper "
                               "than %d (a graph in a node's attribute in a graph ..., or a "
                               "type in a type): more than singletrain reads", path, pos,
                               OX_MAX_NESTING);
            stack[depth].end = pos + (size_t)n;
            stack[depth].msg = (ow_msg)child;
            depth++;
            break;
        }
        default: /* groups, or no wire type: protobuf-c refuses them */
            return ST_OK;
        }
        if (pos > end)
            return ST_OK;
    }
    return ST_OK;
}
