/* Register communication: 256-bit messages (4 doubles) between CPEs of the
 * same row or column, point to point or broadcast, through each receiver's
 * bounded FIFO for that bus (ST_CPE_FIFO_DEPTH messages). A send blocks
 * while a destination FIFO is full, a receive while its FIFO is empty; the
 * scheduler (cpe_cluster.c) resumes the CPE when that changes. Any other pair
 * is an illegal program.
 *
 * Time: a send occupies the sender for the message's share of the
 * aggregate bandwidth (cpe_cost_send_cycles) and cannot start before the
 * destination slot was emptied; the message arrives regcomm_latency_cycles
 * after the send ends; a receive waits for the arrival and then takes
 * regcomm_recv_cycles. Floats are widened to doubles on the way out and
 * narrowed on the way in (swCaffe moves only doubles this way). */
#include <string.h>

#include "cpe_internal.h"

static st_cpe *line_peer(st_cpe *cpe, st_cpe_bus bus, int index)
{
    st_cpe_cluster *cg = cpe->cg;
    return bus == ST_CPE_ROW ? &cg->cpe[cpe->row * ST_CPE_COLS + index]
                             : &cg->cpe[index * ST_CPE_COLS + cpe->col];
}

int cpe_line_has_room(const st_cpe *cpe, st_cpe_bus bus)
{
    int self = bus == ST_CPE_ROW ? cpe->col : cpe->row;
    for (int i = 0; i < ST_CPE_COLS; i++)
        if (i != self && line_peer((st_cpe *)cpe, bus, i)->in[bus].count >= ST_CPE_FIFO_DEPTH)
            return 0;
    return 1;
}

/* When the slot the next message into f goes to was emptied. */
static double fifo_slot_free(const cpe_fifo *f)
{
    return f->free_cycle[(f->head + f->count) % ST_CPE_FIFO_DEPTH];
}

static void fifo_push(cpe_fifo *f, const double msg[ST_CPE_MSG_DOUBLES], double arrival)
{
    cpe_msg *m = &f->slot[(f->head + f->count) % ST_CPE_FIFO_DEPTH];
    memcpy(m->v, msg, sizeof m->v);
    m->arrival_cycle = arrival;
    f->count++;
}

/* Advance the sender's clock over one send that may start no earlier than
 * slot_free; returns the arrival time of the message. */
static double send_clock(st_cpe *cpe, double slot_free, int broadcast)
{
    cpe_clock *c = &cpe->clock;
    double start = slot_free > c->now ? slot_free : c->now;
    double end = start + cpe_cost_send_cycles(&cpe->cg->params, broadcast);
    c->regcomm += end - c->now;
    c->now = end;
    return end + cpe->cg->params.regcomm_latency_cycles;
}

void st_cpe_send(st_cpe *cpe, int dst_row, int dst_col, const double msg[ST_CPE_MSG_DOUBLES])
{
    if (dst_row < 0 || dst_row >= ST_CPE_ROWS || dst_col < 0 || dst_col >= ST_CPE_COLS)
        cpe_fault(cpe, "sent a register message to CPE (%d,%d), which does not exist", dst_row,
                  dst_col);
    if (dst_row == cpe->row && dst_col == cpe->col)
        cpe_fault(cpe, "sent a register message to itself");
    st_cpe_bus bus;
    if (dst_row == cpe->row)
        bus = ST_CPE_ROW;
    else if (dst_col == cpe->col)
        bus = ST_CPE_COL;
    else
        cpe_fault(cpe,
                  "sent a register message to CPE (%d,%d), which is neither in its row nor in "
                  "its column",
                  dst_row, dst_col);
    st_cpe *dst = &cpe->cg->cpe[dst_row * ST_CPE_COLS + dst_col];
    cpe_fifo *f = &dst->in[bus];
    while (f->count >= ST_CPE_FIFO_DEPTH) {
        cpe->wait.kind = CPE_WAIT_SEND;
        cpe->wait.bus = bus;
        cpe->wait.peer = dst->id;
        cpe_block(cpe);
    }
    fifo_push(f, msg, send_clock(cpe, fifo_slot_free(f), 0));
    cpe->counts.msgs_p2p++;
}

void st_cpe_bcast(st_cpe *cpe, st_cpe_bus bus, const double msg[ST_CPE_MSG_DOUBLES])
{
    while (!cpe_line_has_room(cpe, bus)) {
        cpe->wait.kind = CPE_WAIT_BCAST;
        cpe->wait.bus = bus;
        cpe_block(cpe);
    }
    int self = bus == ST_CPE_ROW ? cpe->col : cpe->row;
    double slot_free = 0.0;
    for (int i = 0; i < ST_CPE_COLS; i++) {
        double t = i == self ? 0.0 : fifo_slot_free(&line_peer(cpe, bus, i)->in[bus]);
        if (t > slot_free)
            slot_free = t;
    }
    double arrival = send_clock(cpe, slot_free, 1);
    for (int i = 0; i < ST_CPE_COLS; i++)
        if (i != self)
            fifo_push(&line_peer(cpe, bus, i)->in[bus], msg, arrival);
    cpe->counts.msgs_bcast++;
}

void st_cpe_recv(st_cpe *cpe, st_cpe_bus bus, double msg[ST_CPE_MSG_DOUBLES])
{
    cpe_fifo *f = &cpe->in[bus];
    while (f->count == 0) {
        cpe->wait.kind = CPE_WAIT_RECV;
        cpe->wait.bus = bus;
        cpe_block(cpe);
    }
    const cpe_msg *m = &f->slot[f->head];
    memcpy(msg, m->v, sizeof m->v);
    cpe_clock *c = &cpe->clock;
    double start = m->arrival_cycle > c->now ? m->arrival_cycle : c->now;
    double end = start + cpe->cg->params.regcomm_recv_cycles;
    c->regcomm += end - c->now;
    c->now = end;
    f->free_cycle[f->head] = end;
    f->head = (f->head + 1) % ST_CPE_FIFO_DEPTH;
    f->count--;
    cpe->counts.msgs_received++;
}

/* ---- n values as messages ---- */

/* Message i of n values of type at src: widened, the tail padded with 0. */
static void pack_message(double msg[ST_CPE_MSG_DOUBLES], st_cpe_dtype type, const void *src,
                         size_t first, size_t n)
{
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
    for (size_t j = 0; j < ST_CPE_MSG_DOUBLES && first + j < n; j++) {
        if (type == ST_CPE_F64)
            ((double *)dst)[first + j] = msg[j];
        else
            ((float *)dst)[first + j] = (float)msg[j];
    }
}

void st_cpe_send_values(st_cpe *cpe, int dst_row, int dst_col, st_cpe_dtype type, const void *src,
                        size_t n)
{
    double msg[ST_CPE_MSG_DOUBLES];
    for (size_t i = 0; i < n; i += ST_CPE_MSG_DOUBLES) {
        pack_message(msg, type, src, i, n);
        st_cpe_send(cpe, dst_row, dst_col, msg);
    }
}

void st_cpe_bcast_values(st_cpe *cpe, st_cpe_bus bus, st_cpe_dtype type, const void *src, size_t n)
{
    double msg[ST_CPE_MSG_DOUBLES];
    for (size_t i = 0; i < n; i += ST_CPE_MSG_DOUBLES) {
        pack_message(msg, type, src, i, n);
        st_cpe_bcast(cpe, bus, msg);
    }
}

void st_cpe_recv_values(st_cpe *cpe, st_cpe_bus bus, st_cpe_dtype type, void *dst, size_t n)
{
    double msg[ST_CPE_MSG_DOUBLES];
    for (size_t i = 0; i < n; i += ST_CPE_MSG_DOUBLES) {
        st_cpe_recv(cpe, bus, msg);
        unpack_message(dst, type, msg, i, n);
    }
}
