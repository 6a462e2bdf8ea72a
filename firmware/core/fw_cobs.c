#include "fw_cobs.h"

void fw_cobs_encode(const uint8_t *data, uint32_t n, fw_sink_t sink, void *ctx)
{
    uint32_t i = 0;
    for (;;) {
        uint32_t j = i;
        while (j < n && data[j] != 0 && j - i < 254) {
            j++;
        }
        const uint32_t run = j - i;
        sink(ctx, (uint8_t)(run + 1));
        for (uint32_t k = i; k < j; k++) {
            sink(ctx, data[k]);
        }
        if (run == 254) { /* a full block implies no zero; a block (maybe empty) follows */
            i = j;
            if (i == n) {
                sink(ctx, 1);
                return;
            }
            continue;
        }
        if (j >= n) {
            return;
        }
        i = j + 1; /* skip the zero this block stood for */
        if (i == n) {
            sink(ctx, 1); /* the data ended in a zero: one last, empty block */
            return;
        }
    }
}

void fw_cobs_dec_reset(fw_cobs_dec_t *d)
{
    d->left = 0;
    d->code = 0;
    d->started = 0;
}

int fw_cobs_dec_byte(fw_cobs_dec_t *d, uint8_t c)
{
    if (d->left > 0) {
        d->left--;
        return c;
    }
    /* a code byte: the block before it (if any, and not a full one) ended in a zero */
    const int implied_zero = d->started && d->code != 0xFF;
    d->started = 1;
    d->code = c;
    d->left = (uint8_t)(c - 1);
    return implied_zero ? 0 : -1;
}

int fw_cobs_dec_complete(const fw_cobs_dec_t *d)
{
    return d->started && d->left == 0;
}

typedef struct {
    uint8_t *out;
    uint32_t n;
} buffer_sink_t;

static void buffer_sink(void *ctx, uint8_t byte)
{
    buffer_sink_t *s = (buffer_sink_t *)ctx;
    s->out[s->n++] = byte;
}

uint32_t fw_cobs_encode_buffer(const uint8_t *data, uint32_t n, uint8_t *out)
{
    buffer_sink_t s = {out, 0};
    fw_cobs_encode(data, n, buffer_sink, &s);
    return s.n;
}

int32_t fw_cobs_decode_buffer(const uint8_t *in, uint32_t n, uint8_t *out, uint32_t cap)
{
    fw_cobs_dec_t d;
    uint32_t got = 0;
    fw_cobs_dec_reset(&d);
    for (uint32_t i = 0; i < n; i++) {
        if (in[i] == 0) {
            return -1;
        }
        const int b = fw_cobs_dec_byte(&d, in[i]);
        if (b >= 0) {
            if (got >= cap) {
                return -1;
            }
            out[got++] = (uint8_t)b;
        }
    }
    return fw_cobs_dec_complete(&d) ? (int32_t)got : -1;
}
