#include "fw_server.h"

#include "fw_crc32.h"
#include "fw_exec.h"
#include "fw_port.h"

_Static_assert(FW_MAX_PAYLOAD >= 260 && FW_MAX_PAYLOAD <= FW_PROTOCOL_MAX_PAYLOAD,
               "FW_MAX_PAYLOAD must hold a HELLO answer and stay within the protocol");

enum {
    CMD_HELLO = 0x01,
    CMD_LOAD_BEGIN = 0x02,
    CMD_LOAD_CHUNK = 0x03,
    CMD_LOAD_END = 0x04,
    CMD_PLAN = 0x05,
    CMD_INPUT = 0x06,
    CMD_RUN = 0x07,
    CMD_READ_OUTPUT = 0x08,
    CMD_READ_TIMINGS = 0x09,
    RESPONSE_BIT = 0x80,
    ERROR_TYPE = 0xFF,
    NO_SEQ = 0xFFFF,
};

enum {
    E_BAD_FRAME = 1,
    E_BAD_CRC = 2,
    E_BAD_VERSION = 3,
    E_UNKNOWN_COMMAND = 4,
    E_BAD_ARGUMENT = 5,
    E_TOO_LARGE = 6,
    E_NO_MODEL = 7,
    E_BAD_STATE = 8,
    E_HASH_MISMATCH = 9,
    E_PLAN_TOO_LARGE = 10,
    E_BAD_PLAN = 11,
    E_BAD_MODEL = 12,
    E_NO_RESULT = 13,
    E_RUN_FAILED = 14,
    E_UNSUPPORTED = 15,
};

enum {
    HELLO_MODEL_LOADED = 0x01,
    HELLO_PLAN_READY = 0x02,
    HELLO_CAN_LOAD = 0x04,
    HELLO_CAN_PLAN = 0x08,
    HELLO_CYCLES_MEASURED = 0x10,
};

#define OP_RECORD_BYTES 20
#define MAX_ERROR_MESSAGE 200

static void put16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    put16(p, v);
    put16(p + 2, v >> 16);
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static uint32_t get16(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
    return get16(p) | (get16(p + 2) << 16);
}

static void reset_receiver(fw_server_t *s)
{
    fw_cobs_dec_reset(&s->cobs);
    s->n = 0;
    s->crc = FW_CRC32_INIT;
}

/* Inputs that no other buffer shares bytes with survive a RUN; inputs sharing bytes with
 * an output overwrite a result when staged. */
static void plan_facts(fw_server_t *s)
{
    const fw_model_t *m = s->model;
    s->input_persists = 1;
    s->input_clobbers_output = 0;
    for (uint32_t k = 0; k < m->input_count; k++) {
        const uint32_t i = (uint32_t)m->inputs[k].buf;
        for (uint32_t j = 0; j < m->buffer_count; j++) {
            if (j != i && fw_exec_share_bytes(m, m->offsets, i, j)) {
                s->input_persists = 0;
            }
        }
        for (uint32_t o = 0; o < m->output_count; o++) {
            const uint32_t j = (uint32_t)m->outputs[o].buf;
            if (j == i || fw_exec_share_bytes(m, m->offsets, i, j)) {
                s->input_clobbers_output = 1;
            }
        }
    }
}

void fw_server_init(fw_server_t *s, const fw_model_t *model, const fw_board_t *board)
{
    s->model = model;
    s->board = board;
    reset_receiver(s);
    fw_exec_reset(model);
    s->arena_bytes = model->default_arena_bytes;
    s->plan_open = 0;
    s->plan_received = 0;
    s->result_valid = 0;
    s->run_seq_valid = 0;
    plan_facts(s);
    /* Start from zero inputs, as a freshly loaded virtual board does. */
    for (uint32_t k = 0; k < model->input_count; k++) {
        uint8_t *t = model->arena + model->offsets[model->inputs[k].buf];
        for (uint32_t b = 0; b < model->inputs[k].bytes; b++) {
            t[b] = 0;
        }
    }
    s->input_staged = 1;
}

/* ---- sending -------------------------------------------------------------------------- */

static void port_sink(void *ctx, uint8_t byte)
{
    (void)ctx;
    fw_port_putc(byte);
}

/* Send buf[8 .. 8 + len) as the payload of a frame; a lone 0x00 goes first so that the
 * host drops any partial frame it holds. */
static void send(fw_server_t *s, uint8_t type, uint16_t seq, uint32_t len)
{
    uint8_t *f = s->buf;
    f[0] = FW_MAGIC;
    f[1] = FW_PROTOCOL_VERSION;
    f[2] = type;
    f[3] = 0;
    put16(f + 4, seq);
    put16(f + 6, len);
    put32(f + FW_HEADER_BYTES + len, fw_crc32(0, f, FW_HEADER_BYTES + len));
    fw_port_putc(0);
    fw_cobs_encode(f, FW_HEADER_BYTES + len + FW_CRC_BYTES, port_sink, 0);
    fw_port_putc(0);
    fw_port_flush();
}

static void refuse(fw_server_t *s, uint16_t seq, uint8_t command, uint16_t code,
                   uint32_t needed, uint32_t available, const char *message)
{
    uint8_t *p = s->buf + FW_HEADER_BYTES;
    uint32_t n = 12;
    put16(p, code);
    p[2] = command;
    p[3] = 0;
    put32(p + 4, needed);
    put32(p + 8, available);
    for (uint32_t i = 0; message[i] && i < MAX_ERROR_MESSAGE; i++) {
        p[n++] = (uint8_t)message[i];
    }
    send(s, ERROR_TYPE, seq, n);
}

static void answer(fw_server_t *s, uint8_t command, uint16_t seq, uint32_t len)
{
    send(s, (uint8_t)(command | RESPONSE_BIT), seq, len);
}

static uint64_t ticks_to_ns(uint64_t ticks, uint32_t hz)
{
    return (ticks / hz) * 1000000000u + ((ticks % hz) * 1000000000u) / hz;
}

/* ---- commands ------------------------------------------------------------------------- */

static uint32_t put_str(uint8_t *p, const char *text)
{
    uint32_t n = 0;
    while (text[n] && n < 64) {
        p[1 + n] = (uint8_t)text[n];
        n++;
    }
    p[0] = (uint8_t)n;
    return n + 1;
}

static void on_hello(fw_server_t *s, uint16_t seq)
{
    const fw_model_t *m = s->model;
    const fw_board_t *b = s->board;
    uint8_t *p = s->buf + FW_HEADER_BYTES;
    p[0] = FW_PROTOCOL_VERSION;
    p[1] = HELLO_MODEL_LOADED | HELLO_PLAN_READY | HELLO_CAN_PLAN |
           (b->cycles_measured ? HELLO_CYCLES_MEASURED : 0);
    put16(p + 2, FW_MAX_PAYLOAD);
    put32(p + 4, b->sram_bytes);
    put32(p + 8, b->flash_bytes);
    put32(p + 12, b->clock_hz);
    put32(p + 16, b->arena_limit_bytes);
    put32(p + 20, b->model_limit_bytes);
    put32(p + 24, m->model_bytes);
    put32(p + 28, s->arena_bytes);
    for (uint32_t i = 0; i < 32; i++) {
        p[32 + i] = m->sha256[i];
    }
    uint32_t n = 64;
    n += put_str(p + n, b->id);
    n += put_str(p + n, b->name);
    n += put_str(p + n, b->core);
    answer(s, CMD_HELLO, seq, n);
}

static void on_plan(fw_server_t *s, uint16_t seq, uint32_t len)
{
    const fw_model_t *m = s->model;
    const uint8_t *p = s->buf + FW_HEADER_BYTES;
    const uint32_t nbuf = m->buffer_count;
    if (len < 8 || (len - 8) % 8) {
        refuse(s, seq, CMD_PLAN, E_BAD_ARGUMENT, len, 8, "PLAN payload is not 8 bytes + "
               "whole (offset, size) pairs");
        return;
    }
    const uint32_t arena = get32(p), total = get16(p + 4), first = get16(p + 6);
    const uint32_t count = (len - 8) / 8;
    if (total != nbuf) {
        refuse(s, seq, CMD_PLAN, E_BAD_PLAN, total, nbuf, "wrong buffer count for this model");
        return;
    }
    if (arena > s->board->arena_limit_bytes) {
        s->plan_open = 0;
        const uint32_t runtime = s->board->sram_bytes - s->board->arena_limit_bytes;
        refuse(s, seq, CMD_PLAN, E_PLAN_TOO_LARGE, arena + runtime, s->board->sram_bytes,
               "arena + runtime RAM exceed the board's SRAM");
        return;
    }
    if (first == 0 || !s->plan_open) {
        if (first != 0) {
            refuse(s, seq, CMD_PLAN, E_BAD_STATE, first, 0, "first PLAN part must start at "
                   "buffer 0");
            return;
        }
        s->plan_open = 1;
        s->plan_arena_bytes = arena;
        s->plan_received = 0;
    }
    if (first != s->plan_received || arena != s->plan_arena_bytes) {
        refuse(s, seq, CMD_PLAN, E_BAD_STATE, first, s->plan_received, "PLAN part out of "
               "order");
        return;
    }
    for (uint32_t k = 0; k < count; k++) {
        const uint32_t i = first + k;
        const uint32_t offset = get32(p + 8 + 8 * k), size = get32(p + 12 + 8 * k);
        if (i >= nbuf) {
            refuse(s, seq, CMD_PLAN, E_BAD_PLAN, i + 1, nbuf, "more plan entries than "
                   "buffers");
            return;
        }
        if (size != m->buffers[i].size) {
            refuse(s, seq, CMD_PLAN, E_BAD_PLAN, size, m->buffers[i].size, "a buffer's size "
                   "differs from the model's");
            return;
        }
        if (offset % 16) {
            refuse(s, seq, CMD_PLAN, E_BAD_PLAN, offset, 0, "offset not a multiple of 16");
            return;
        }
        if ((uint64_t)offset + size > arena) {
            refuse(s, seq, CMD_PLAN, E_BAD_PLAN, offset + size, arena, "buffer past the "
                   "arena's end");
            return;
        }
        m->plan_staging[i] = offset;
    }
    s->plan_received = (uint16_t)(s->plan_received + count);
    const uint8_t complete = s->plan_received == nbuf;
    if (complete) {
        s->plan_open = 0;
        for (uint32_t i = 0; i < nbuf; i++) {
            for (uint32_t j = i + 1; j < nbuf; j++) {
                if (fw_exec_live_together(m, i, j) &&
                    fw_exec_share_bytes(m, m->plan_staging, i, j)) {
                    refuse(s, seq, CMD_PLAN, E_BAD_PLAN, i, j, "two buffers overlap in "
                           "memory while both live");
                    return;
                }
            }
        }
        for (uint32_t i = 0; i < nbuf; i++) {
            m->offsets[i] = m->plan_staging[i];
        }
        s->arena_bytes = arena;
        s->result_valid = 0;
        s->run_seq_valid = 0;
        s->input_staged = 0; /* the inputs moved: stage them again */
        plan_facts(s);
    }
    uint8_t *r = s->buf + FW_HEADER_BYTES;
    put16(r, s->plan_received);
    put16(r + 2, nbuf);
    put32(r + 4, s->plan_arena_bytes);
    put32(r + 8, s->board->arena_limit_bytes);
    r[12] = complete;
    answer(s, CMD_PLAN, seq, 13);
}

static void on_input(fw_server_t *s, uint16_t seq, uint32_t len)
{
    const fw_model_t *m = s->model;
    uint8_t *p = s->buf + FW_HEADER_BYTES;
    if (len < 5) {
        refuse(s, seq, CMD_INPUT, E_BAD_ARGUMENT, len, 5, "INPUT needs an offset and data");
        return;
    }
    const uint32_t offset = get32(p), n = len - 4;
    const uint64_t end = (uint64_t)offset + n;
    if (end > m->input_bytes) {
        refuse(s, seq, CMD_INPUT, E_BAD_ARGUMENT, (uint32_t)end, m->input_bytes,
               "input bytes end past the model's inputs");
        return;
    }
    fw_exec_write_inputs(m, offset, p + 4, n);
    s->input_staged = 1;
    s->run_seq_valid = 0;
    if (s->input_clobbers_output) {
        s->result_valid = 0; /* the inputs' bytes hold the last output under this plan */
    }
    put32(p, (uint32_t)end);
    put32(p + 4, m->input_bytes);
    answer(s, CMD_INPUT, seq, 8);
}

static void send_result(fw_server_t *s, uint16_t seq)
{
    const fw_model_t *m = s->model;
    uint8_t *p = s->buf + FW_HEADER_BYTES;
    put32(p, m->output_bytes);
    put32(p + 4, s->arena_bytes);
    put16(p + 8, m->op_count);
    put16(p + 10, s->board->cycles_measured ? 1 : 0);
    put64(p + 12, ticks_to_ns(s->result_ticks, s->board->clock_hz));
    put64(p + 20, s->result_ticks);
    answer(s, CMD_RUN, seq, 28);
}

static void on_run(fw_server_t *s, uint16_t seq, uint32_t len)
{
    const fw_model_t *m = s->model;
    if (len > 0) {
        if (len != m->input_bytes) {
            refuse(s, seq, CMD_RUN, E_BAD_ARGUMENT, len, m->input_bytes,
                   "RUN carries the wrong number of input bytes");
            return;
        }
        fw_exec_write_inputs(m, 0, s->buf + FW_HEADER_BYTES, len);
    } else if (s->run_seq_valid && s->result_valid && seq == s->run_seq) {
        send_result(s, seq); /* a resent RUN: answer again, the inputs are gone */
        return;
    } else if (!s->input_staged) {
        refuse(s, seq, CMD_RUN, E_BAD_STATE, 0, m->input_bytes, "no staged input: the last "
               "RUN reused its bytes; send INPUT again");
        return;
    }
    s->result_ticks = fw_exec_run(m);
    s->result_valid = 1;
    s->run_seq = seq;
    s->run_seq_valid = 1;
    s->input_staged = s->input_persists;
    send_result(s, seq);
}

static void on_read_output(fw_server_t *s, uint16_t seq, uint32_t len)
{
    const fw_model_t *m = s->model;
    uint8_t *p = s->buf + FW_HEADER_BYTES;
    if (len != 6) {
        refuse(s, seq, CMD_READ_OUTPUT, E_BAD_ARGUMENT, len, 6, "READ_OUTPUT payload is 6 "
               "bytes");
        return;
    }
    if (!s->result_valid) {
        refuse(s, seq, CMD_READ_OUTPUT, E_NO_RESULT, 0, 0, "no RUN result to read");
        return;
    }
    const uint32_t offset = get32(p), n = get16(p + 4);
    const uint64_t end = (uint64_t)offset + n;
    if (end > m->output_bytes || n > FW_MAX_PAYLOAD - 4) {
        refuse(s, seq, CMD_READ_OUTPUT, E_BAD_ARGUMENT, (uint32_t)end, m->output_bytes,
               "output range past the end");
        return;
    }
    fw_exec_read_outputs(m, offset, p + 4, n);
    answer(s, CMD_READ_OUTPUT, seq, 4 + n);
}

static void on_read_timings(fw_server_t *s, uint16_t seq, uint32_t len)
{
    const fw_model_t *m = s->model;
    uint8_t *p = s->buf + FW_HEADER_BYTES;
    if (len != 4) {
        refuse(s, seq, CMD_READ_TIMINGS, E_BAD_ARGUMENT, len, 4, "READ_TIMINGS payload is 4 "
               "bytes");
        return;
    }
    if (!s->result_valid) {
        refuse(s, seq, CMD_READ_TIMINGS, E_NO_RESULT, 0, 0, "no RUN result to read");
        return;
    }
    const uint32_t first = get16(p), count = get16(p + 2);
    if (first + count > m->op_count || count > (FW_MAX_PAYLOAD - 4) / OP_RECORD_BYTES) {
        refuse(s, seq, CMD_READ_TIMINGS, E_BAD_ARGUMENT, first + count, m->op_count,
               "op records past the end");
        return;
    }
    for (uint32_t k = 0; k < count; k++) {
        uint8_t *r = p + 4 + OP_RECORD_BYTES * k;
        const uint64_t ticks = m->op_ticks[first + k];
        put64(r, ticks_to_ns(ticks, s->board->clock_hz));
        put64(r + 8, ticks);
        put32(r + 16, m->op_macs[first + k]);
    }
    answer(s, CMD_READ_TIMINGS, seq, 4 + OP_RECORD_BYTES * count);
}

static void handle(fw_server_t *s, uint8_t type, uint16_t seq, uint32_t len)
{
    switch (type) {
    case CMD_HELLO:
        on_hello(s, seq);
        break;
    case CMD_LOAD_BEGIN:
    case CMD_LOAD_CHUNK:
    case CMD_LOAD_END:
        refuse(s, seq, type, E_UNSUPPORTED, 0, 0, "the model is compiled into this "
               "firmware: build it for another model (inferlab board build)");
        break;
    case CMD_PLAN:
        on_plan(s, seq, len);
        break;
    case CMD_INPUT:
        on_input(s, seq, len);
        break;
    case CMD_RUN:
        on_run(s, seq, len);
        break;
    case CMD_READ_OUTPUT:
        on_read_output(s, seq, len);
        break;
    case CMD_READ_TIMINGS:
        on_read_timings(s, seq, len);
        break;
    default:
        refuse(s, seq, type, E_UNKNOWN_COMMAND, 0, 0, "unknown command");
        break;
    }
}

/* ---- receiving ------------------------------------------------------------------------ */

static void take(fw_server_t *s, uint8_t byte)
{
    if (s->n >= FW_CRC_BYTES) { /* the byte 4 back is not part of the CRC field */
        s->crc = fw_crc32_byte(s->crc, s->tail[s->n & 3]);
    }
    s->tail[s->n & 3] = byte;
    if (s->n < sizeof s->buf) {
        s->buf[s->n] = byte;
    }
    if (s->n < 0xFFFFFFFFu) {
        s->n++;
    }
}

static void end_of_frame(fw_server_t *s)
{
    const fw_cobs_dec_t cobs = s->cobs;
    const uint32_t n = s->n;
    const uint32_t crc = ~s->crc;
    reset_receiver(s);
    if (!cobs.started) {
        return; /* an empty frame: ignored */
    }
    if (!fw_cobs_dec_complete(&cobs)) {
        refuse(s, NO_SEQ, 0, E_BAD_FRAME, 0, 0, "bad COBS: a block runs past the frame");
        return;
    }
    if (n < FW_HEADER_BYTES + FW_CRC_BYTES) {
        refuse(s, NO_SEQ, 0, E_BAD_FRAME, 0, 0, "frame shorter than header + CRC");
        return;
    }
    if (n > FW_HEADER_BYTES + FW_PROTOCOL_MAX_PAYLOAD + FW_CRC_BYTES) {
        refuse(s, NO_SEQ, 0, E_BAD_FRAME, 0, 0, "frame longer than the protocol allows");
        return;
    }
    const uint32_t sent = (uint32_t)s->tail[n & 3] | ((uint32_t)s->tail[(n + 1) & 3] << 8) |
                          ((uint32_t)s->tail[(n + 2) & 3] << 16) |
                          ((uint32_t)s->tail[(n + 3) & 3] << 24);
    if (sent != crc) {
        refuse(s, NO_SEQ, 0, E_BAD_CRC, 0, 0, "CRC mismatch");
        return;
    }
    const uint8_t *h = s->buf;
    const uint8_t type = h[2];
    const uint16_t seq = (uint16_t)get16(h + 4);
    const uint32_t length = get16(h + 6);
    if (h[0] != FW_MAGIC) {
        refuse(s, NO_SEQ, 0, E_BAD_FRAME, 0, 0, "bad magic");
        return;
    }
    if (h[1] != FW_PROTOCOL_VERSION) {
        refuse(s, seq, type, E_BAD_VERSION, h[1], FW_PROTOCOL_VERSION,
               "protocol version not spoken");
        return;
    }
    if (length != n - FW_HEADER_BYTES - FW_CRC_BYTES) {
        refuse(s, NO_SEQ, 0, E_BAD_FRAME, 0, 0, "header length differs from the payload");
        return;
    }
    if (length > FW_MAX_PAYLOAD) {
        refuse(s, seq, type, E_TOO_LARGE, length, FW_MAX_PAYLOAD,
               "payload longer than this board's max payload");
        return;
    }
    handle(s, type, seq, length);
}

void fw_server_feed(fw_server_t *s, uint8_t byte)
{
    if (byte == 0) {
        end_of_frame(s);
        return;
    }
    const int decoded = fw_cobs_dec_byte(&s->cobs, byte);
    if (decoded >= 0) {
        take(s, (uint8_t)decoded);
    }
}
