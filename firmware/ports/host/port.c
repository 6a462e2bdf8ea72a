/* The host port: the firmware as a process speaking the protocol on stdin/stdout (a pipe,
 * or a pty for `inferlab board run --port /dev/pts/N`), for unit tests and debugging. The
 * "cycles" it reports are nanoseconds of CLOCK_MONOTONIC. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "fw_port.h"

static unsigned char in_buf[4096];
static long in_len, in_pos;
static unsigned char out_buf[8192];
static long out_len;

void fw_port_init(void)
{
}

int fw_port_getc(void)
{
    if (in_pos == in_len) {
        fw_port_flush();
        ssize_t got;
        do {
            got = read(0, in_buf, sizeof in_buf);
        } while (got < 0 && errno == EINTR);
        if (got <= 0) {
            return -1;
        }
        in_len = got;
        in_pos = 0;
    }
    return in_buf[in_pos++];
}

void fw_port_putc(uint8_t byte)
{
    if (out_len == (long)sizeof out_buf) {
        fw_port_flush();
    }
    out_buf[out_len++] = byte;
}

void fw_port_flush(void)
{
    long done = 0;
    while (done < out_len) {
        const ssize_t put = write(1, out_buf + done, (size_t)(out_len - done));
        if (put <= 0) {
            break;
        }
        done += put;
    }
    out_len = 0;
}

uint64_t fw_port_ticks(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void fw_port_limits(uint32_t arena_capacity, uint32_t *arena_limit_bytes, uint32_t *code_bytes)
{
    *arena_limit_bytes = arena_capacity; /* the static arena; nothing lies past it */
    *code_bytes = 0;
}
