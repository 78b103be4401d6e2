/* Register communication: 256-bit messages (4 doubles) between CPEs of the
 * same row or column, point to point or broadcast, through each receiver's
 * bounded FIFO for that bus (ST_CPE_FIFO_DEPTH messages). A send blocks
 * while a destination FIFO is full, a receive while its FIFO is empty; the
 * scheduler (cpe_sched.c) resumes the CPE when that changes. Any other pair
 * is an illegal program.
 *
 * Time: a send occupies the sender for the message's share of the
 * aggregate bandwidth (cpe_cost_send_cycles) and cannot start before the
 * destination slot was emptied; the message arrives regcomm_latency_cycles
 * after the send ends; a receive waits for the arrival and then takes
 * regcomm_recv_cycles. Floats are widened to doubles on the way out and
 * narrowed on the way in (swCaffe moves only doubles this way). In
 * cost-only mode no values are packed or unpacked.
 *
 * Emulation: the single-message calls and the *_values ones share one path
 * per direction, which moves as many messages as the FIFOs allow before it
 * blocks - the same messages, times and counts as one call per message,
 * without re-checking the wait and recomputing the costs each time. */
#include <string.h>

#include "cpe_internal.h"

/* The slot the next message into f goes to. */
static int fifo_tail(const cpe_fifo *f)
{
    return (f->head + f->count) % ST_CPE_FIFO_DEPTH;
}

/* ---- messages from and to values ---- */

/* Message first / 4 of n values of type at src: widened, the tail padded
 * with 0. */
static void pack_message(double msg[ST_CPE_MSG_DOUBLES], st_cpe_dtype type, const void *src,
                         size_t first, size_t n)
{
    if (first + ST_CPE_MSG_DOUBLES <= n) {
        if (type == ST_CPE_F64) {
            memcpy(msg, (const double *)src + first, ST_CPE_MSG_BYTES);
        } else {
            const float *f = (const float *)src + first;
            for (int j = 0; j < ST_CPE_MSG_DOUBLES; j++)
                msg[j] = f[j];
        }
        return;
    }
    for (size_t j = 0; j < ST_CPE_MSG_DOUBLES; j++) {
        size_t at = first + j;
        msg[j] = at >= n ? 0.0
                 : type == ST_CPE_F64 ? ((const double *)src)[at]
                                      : (double)((const float *)src)[at];
    }
}

static void unpack_message(void *dst, st_cpe_dtype type, const double msg[ST_CPE_MSG_DOUBLES],
                           size_t first, size_t n)
{
    if (first + ST_CPE_MSG_DOUBLES <= n) {
        if (type == ST_CPE_F64) {
            memcpy((double *)dst + first, msg, ST_CPE_MSG_BYTES);
        } else {
            float *f = (float *)dst + first;
            for (int j = 0; j < ST_CPE_MSG_DOUBLES; j++)
                f[j] = (float)msg[j];
        }
        return;
    }
    for (size_t j = 0; j < ST_CPE_MSG_DOUBLES && first + j < n; j++) {
        if (type == ST_CPE_F64)
            ((double *)dst)[first + j] = msg[j];
        else
            ((float *)dst)[first + j] = (float)msg[j];
    }
}

/* ---- sending ---- */

/* Advance the sender's clock over one send that may start no earlier than
 * slot_free and takes send_cycles; returns the arrival time of the message. */
static double send_clock(st_cpe *cpe, double slot_free, double send_cycles)
{
    cpe_clock *c = &cpe->clock;
    double start = slot_free > c->now ? slot_free : c->now;
    double end = start + send_cycles;
    c->regcomm += end - c->now;
    c->now = end;
    return end + cpe->cg->params.regcomm_latency_cycles;
}

static void fifo_push(cpe_fifo *f, const double msg[ST_CPE_MSG_DOUBLES], double arrival)
{
    cpe_msg *m = &f->slot[fifo_tail(f)];
    memcpy(m->v, msg, sizeof m->v);
    m->arrival_cycle = arrival;
    f->count++;
}

/* The destination's FIFO for a message from cpe to (dst_row, dst_col);
 * anything but another CPE of its row or column is illegal. */
static cpe_fifo *p2p_fifo(st_cpe *cpe, int dst_row, int dst_col, st_cpe_bus *bus, int *dst_id)
{
    if (dst_row < 0 || dst_row >= cpe->cg->rows || dst_col < 0 || dst_col >= cpe->cg->cols)
        cpe_fault(cpe, "sent a register message to CPE (%d,%d), which does not exist", dst_row,
                  dst_col);
    if (dst_row == cpe->row && dst_col == cpe->col)
        cpe_fault(cpe, "sent a register message to itself");
    if (dst_row == cpe->row)
        *bus = ST_CPE_ROW;
    else if (dst_col == cpe->col)
        *bus = ST_CPE_COL;
    else
        cpe_fault(cpe,
                  "sent a register message to CPE (%d,%d), which is neither in its row nor in "
                  "its column",
                  dst_row, dst_col);
    *dst_id = dst_row * cpe->cg->cols + dst_col;
    return &cpe->cg->cpe[*dst_id].in[*bus];
}

/* n values of type at src as ceil(n / 4) messages to one CPE. While the
 * FIFO has room the messages go one after another without a return to the
 * scheduler, as they would one send at a time. */
static void send_messages(st_cpe *cpe, int dst_row, int dst_col, st_cpe_dtype type,
                          const void *src, size_t n)
{
    if (n == 0)
        return;
    st_cpe_bus bus;
    int dst_id;
    cpe_fifo *f = p2p_fifo(cpe, dst_row, dst_col, &bus, &dst_id);
    double send_cycles = cpe_cost_send_cycles(&cpe->cg->params, 0);
    double msg[ST_CPE_MSG_DOUBLES] = {0};
    for (size_t i = 0; i < n;) {
        while (f->count >= ST_CPE_FIFO_DEPTH) {
            cpe->wait.kind = CPE_WAIT_SEND;
            cpe->wait.bus = bus;
            cpe->wait.peer = dst_id;
            cpe_block(cpe);
        }
        for (; i < n && f->count < ST_CPE_FIFO_DEPTH; i += ST_CPE_MSG_DOUBLES) {
            if (!cpe->cg->cost_only)
                pack_message(msg, type, src, i, n);
            fifo_push(f, msg, send_clock(cpe, f->free_cycle[fifo_tail(f)], send_cycles));
            cpe->counts.msgs_p2p++;
        }
    }
}

/* n values as ceil(n / 4) broadcasts along bus: each message goes into the
 * FIFO of the other CPEs of the line (7 on an 8 x 8 mesh), when all of
 * them have room. */
static void bcast_messages(st_cpe *cpe, st_cpe_bus bus, st_cpe_dtype type, const void *src,
                           size_t n)
{
    int self = bus == ST_CPE_ROW ? cpe->col : cpe->row;
    int peers = cpe_line_length(cpe, bus) - 1;
    cpe_fifo *peer[ST_CPE_MESH_MAX];
    for (int i = 0, p = 0; i <= peers; i++)
        if (i != self)
            peer[p++] = &cpe_line_peer(cpe, bus, i)->in[bus];
    double send_cycles = cpe_cost_send_cycles(&cpe->cg->params, 1);
    double msg[ST_CPE_MSG_DOUBLES] = {0};
    for (size_t i = 0; i < n;) {
        while (!cpe_line_has_room(cpe, bus)) {
            cpe->wait.kind = CPE_WAIT_BCAST;
            cpe->wait.bus = bus;
            cpe_block(cpe);
        }
        int fullest = 0;
        for (int p = 0; p < peers; p++)
            if (peer[p]->count > fullest)
                fullest = peer[p]->count;
        for (int room = ST_CPE_FIFO_DEPTH - fullest; i < n && room > 0;
             room--, i += ST_CPE_MSG_DOUBLES) {
            if (!cpe->cg->cost_only)
                pack_message(msg, type, src, i, n);
            double slot_free = 0.0;
            for (int p = 0; p < peers; p++) {
                double t = peer[p]->free_cycle[fifo_tail(peer[p])];
                if (t > slot_free)
                    slot_free = t;
            }
            double arrival = send_clock(cpe, slot_free, send_cycles);
            for (int p = 0; p < peers; p++)
                fifo_push(peer[p], msg, arrival);
            cpe->counts.msgs_bcast++;
        }
    }
}

/* ---- receiving ---- */

/* ceil(n / 4) messages from the FIFO for bus into n values of type at dst.
 * The messages already in the FIFO are taken in one go, the clock kept in
 * registers; each receive costs as it would alone. */
static void recv_messages(st_cpe *cpe, st_cpe_bus bus, st_cpe_dtype type, void *dst, size_t n)
{
    cpe_fifo *f = &cpe->in[bus];
    cpe_clock *c = &cpe->clock;
    double recv_cycles = cpe->cg->params.regcomm_recv_cycles;
    for (size_t i = 0; i < n;) {
        while (f->count == 0) {
            cpe->wait.kind = CPE_WAIT_RECV;
            cpe->wait.bus = bus;
            cpe_block(cpe);
        }
        double now = c->now, regcomm = c->regcomm;
        int head = f->head, taken = 0;
        for (; i < n && taken < f->count; taken++, i += ST_CPE_MSG_DOUBLES) {
            const cpe_msg *m = &f->slot[head];
            if (!cpe->cg->cost_only)
                unpack_message(dst, type, m->v, i, n);
            double start = m->arrival_cycle > now ? m->arrival_cycle : now;
            double end = start + recv_cycles;
            regcomm += end - now;
            now = end;
            f->free_cycle[head] = end;
            head = (head + 1) % ST_CPE_FIFO_DEPTH;
        }
        c->now = now;
        c->regcomm = regcomm;
        f->head = head;
        f->count -= taken;
        cpe->counts.msgs_received += (uint64_t)taken;
    }
}

/* ---- the API ---- */

void st_cpe_send(st_cpe *cpe, int dst_row, int dst_col, const double msg[ST_CPE_MSG_DOUBLES])
{
    send_messages(cpe, dst_row, dst_col, ST_CPE_F64, msg, ST_CPE_MSG_DOUBLES);
}

void st_cpe_bcast(st_cpe *cpe, st_cpe_bus bus, const double msg[ST_CPE_MSG_DOUBLES])
{
    bcast_messages(cpe, bus, ST_CPE_F64, msg, ST_CPE_MSG_DOUBLES);
}

void st_cpe_recv(st_cpe *cpe, st_cpe_bus bus, double msg[ST_CPE_MSG_DOUBLES])
{
    recv_messages(cpe, bus, ST_CPE_F64, msg, ST_CPE_MSG_DOUBLES);
}

void st_cpe_send_values(st_cpe *cpe, int dst_row, int dst_col, st_cpe_dtype type, const void *src,
                        size_t n)
{
    send_messages(cpe, dst_row, dst_col, type, src, n);
}

void st_cpe_bcast_values(st_cpe *cpe, st_cpe_bus bus, st_cpe_dtype type, const void *src, size_t n)
{
    bcast_messages(cpe, bus, type, src, n);
}

void st_cpe_recv_values(st_cpe *cpe, st_cpe_bus bus, st_cpe_dtype type, void *dst, size_t n)
{
    recv_messages(cpe, bus, type, dst, n);
}
