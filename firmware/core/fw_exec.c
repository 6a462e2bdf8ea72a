#include "fw_exec.h"

#include "fw_kernels.h"
#include "fw_port.h"

void fw_exec_reset(const fw_model_t *m)
{
    for (uint32_t i = 0; i < m->buffer_count; i++) {
        m->offsets[i] = m->default_offsets[i];
    }
}

void *fw_exec_tensor(const fw_model_t *m, fw_tref_t ref)
{
    if (ref.buf >= 0) {
        return m->arena + m->offsets[ref.buf];
    }
    return (void *)ref.data;
}

static void run_op(const fw_model_t *m, const fw_op_t *op)
{
    switch (op->kind) {
    case FW_OP_CONV: {
        const fw_conv_t *p = (const fw_conv_t *)op->params;
        fw_conv_int8(p, fw_exec_tensor(m, p->in), fw_exec_tensor(m, p->out));
        break;
    }
    case FW_OP_DEPTHWISE: {
        const fw_conv_t *p = (const fw_conv_t *)op->params;
        fw_depthwise_int8(p, fw_exec_tensor(m, p->in), fw_exec_tensor(m, p->out));
        break;
    }
    case FW_OP_FULLY_CONNECTED: {
        const fw_fc_t *p = (const fw_fc_t *)op->params;
        fw_fully_connected_int8(p, fw_exec_tensor(m, p->in), fw_exec_tensor(m, p->out));
        break;
    }
    case FW_OP_AVERAGE_POOL: {
        const fw_pool_t *p = (const fw_pool_t *)op->params;
        fw_average_pool_int8(p, fw_exec_tensor(m, p->in), fw_exec_tensor(m, p->out));
        break;
    }
    case FW_OP_MAX_POOL: {
        const fw_pool_t *p = (const fw_pool_t *)op->params;
        fw_max_pool_int8(p, fw_exec_tensor(m, p->in), fw_exec_tensor(m, p->out));
        break;
    }
    case FW_OP_SOFTMAX: {
        const fw_softmax_t *p = (const fw_softmax_t *)op->params;
        fw_softmax_int8(p, fw_exec_tensor(m, p->in), fw_exec_tensor(m, p->out));
        break;
    }
    case FW_OP_ADD: {
        const fw_add_t *p = (const fw_add_t *)op->params;
        fw_add_int8(p, fw_exec_tensor(m, p->a), fw_exec_tensor(m, p->b),
                    fw_exec_tensor(m, p->out));
        break;
    }
    case FW_OP_QUANTIZE: {
        const fw_quant_t *p = (const fw_quant_t *)op->params;
        fw_quantize(p, fw_exec_tensor(m, p->in), fw_exec_tensor(m, p->out));
        break;
    }
    case FW_OP_REQUANTIZE: {
        const fw_quant_t *p = (const fw_quant_t *)op->params;
        fw_requantize(p, fw_exec_tensor(m, p->in), fw_exec_tensor(m, p->out));
        break;
    }
    case FW_OP_DEQUANTIZE: {
        const fw_quant_t *p = (const fw_quant_t *)op->params;
        fw_dequantize(p, fw_exec_tensor(m, p->in), fw_exec_tensor(m, p->out));
        break;
    }
    case FW_OP_RESHAPE: {
        const fw_reshape_t *p = (const fw_reshape_t *)op->params;
        fw_copy(fw_exec_tensor(m, p->out), fw_exec_tensor(m, p->in), p->bytes);
        break;
    }
    default:
        break; /* codegen emits only the kinds above */
    }
}

uint64_t fw_exec_run(const fw_model_t *m)
{
    const uint64_t start = fw_port_ticks();
    uint64_t t = start;
    for (uint32_t i = 0; i < m->op_count; i++) {
        run_op(m, &m->ops[i]);
        const uint64_t now = fw_port_ticks();
        m->op_ticks[i] = now - t;
        t = now;
    }
    return t - start;
}

/* Walk the pieces of [offset, offset + n) that fall in each tensor of `ios`. */
static void io_copy(const fw_model_t *m, const fw_io_t *ios, uint32_t count, uint32_t offset,
                    uint8_t *data, uint32_t n, int to_arena)
{
    uint32_t base = 0;
    for (uint32_t k = 0; k < count && n > 0; k++) {
        const uint32_t size = ios[k].bytes;
        if (offset < base + size) {
            const uint32_t at = offset - base;
            uint32_t take = size - at;
            if (take > n) {
                take = n;
            }
            uint8_t *tensor = m->arena + m->offsets[ios[k].buf] + at;
            if (to_arena) {
                fw_copy(tensor, data, take);
            } else {
                fw_copy(data, tensor, take);
            }
            data += take;
            offset += take;
            n -= take;
        }
        base += size;
    }
}

void fw_exec_write_inputs(const fw_model_t *m, uint32_t offset, const uint8_t *data,
                          uint32_t n)
{
    io_copy(m, m->inputs, m->input_count, offset, (uint8_t *)data, n, 1);
}

void fw_exec_read_outputs(const fw_model_t *m, uint32_t offset, uint8_t *data, uint32_t n)
{
    io_copy(m, m->outputs, m->output_count, offset, data, n, 0);
}

int fw_exec_live_together(const fw_model_t *m, uint32_t i, uint32_t j)
{
    const fw_buffer_t *a = &m->buffers[i], *b = &m->buffers[j];
    return a->first <= b->last && b->first <= a->last;
}

int fw_exec_share_bytes(const fw_model_t *m, const uint32_t *offsets, uint32_t i, uint32_t j)
{
    return offsets[i] < offsets[j] + m->buffers[j].size &&
           offsets[j] < offsets[i] + m->buffers[i].size;
}
