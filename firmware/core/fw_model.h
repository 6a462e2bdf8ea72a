/* A compiled-in model: what engines/board/codegen.py writes into model.c.
 *
 * Everything here is const and stays in flash (weights, operator parameters, the plan),
 * except three small RAM arrays the model struct points at: the active plan's offsets,
 * the staging area of a PLAN arriving in parts, and the per-op tick counts of the last
 * RUN. Activations live in ONE arena at offsets[buffer]; nothing is allocated at run time.
 */
#ifndef FW_MODEL_H
#define FW_MODEL_H

#include <stdint.h>

enum fw_dtype { FW_INT8 = 1, FW_INT16 = 2, FW_INT32 = 3, FW_FLOAT32 = 4, FW_UINT8 = 5 };

/* A tensor an operator reads or writes: arena buffer `buf` (>= 0), or constant bytes. */
typedef struct {
    int16_t buf;
    const void *data;
} fw_tref_t;

/* One planned buffer in the canonical order both ends derive from the model (PROTOCOL.md,
 * PLAN): `size` bytes (a multiple of 16) live from step `first` to step `last`. */
typedef struct {
    uint32_t size;
    int32_t first;
    int32_t last;
} fw_buffer_t;

/* A graph input or output: its arena buffer and byte count. */
typedef struct {
    int16_t buf;
    uint32_t bytes;
} fw_io_t;

enum fw_op_kind {
    FW_OP_CONV = 1,
    FW_OP_DEPTHWISE = 2,
    FW_OP_FULLY_CONNECTED = 3,
    FW_OP_AVERAGE_POOL = 4,
    FW_OP_MAX_POOL = 5,
    FW_OP_SOFTMAX = 6,
    FW_OP_ADD = 7,
    FW_OP_QUANTIZE = 8,   /* float32 -> int8 / int16 */
    FW_OP_REQUANTIZE = 9, /* int8 / int16 -> int8 / int16 */
    FW_OP_DEQUANTIZE = 10,
    FW_OP_RESHAPE = 11,
};

/* CONV_2D (groups = in_c / filter_c) and DEPTHWISE_CONV_2D (depth_multiplier). */
typedef struct {
    fw_tref_t in, out;
    const int8_t *filter;
    const int32_t *bias; /* NULL: no bias */
    const int32_t *multiplier;
    const int8_t *shift; /* per output channel */
    uint16_t batches, in_h, in_w, in_c, out_h, out_w, out_c, k_h, k_w;
    uint16_t filter_c;         /* CONV: filter depth (in_c / groups) */
    uint16_t depth_multiplier; /* DEPTHWISE */
    uint8_t stride_h, stride_w, dilation_h, dilation_w;
    int16_t pad_h, pad_w;
    int32_t input_offset, output_offset;
    int16_t act_min, act_max;
} fw_conv_t;

typedef struct {
    fw_tref_t in, out;
    const int8_t *filter; /* (units, depth) */
    const int32_t *bias;
    const int32_t *multiplier;
    const int8_t *shift; /* per unit when per_channel, else one */
    uint32_t batches, units, depth;
    int32_t input_offset, filter_offset, output_offset;
    int16_t act_min, act_max;
    uint8_t per_channel;
} fw_fc_t;

typedef struct {
    fw_tref_t in, out;
    uint16_t batches, in_h, in_w, channels, out_h, out_w, filter_h, filter_w;
    uint8_t stride_h, stride_w;
    int16_t pad_h, pad_w;
    int16_t act_min, act_max;
} fw_pool_t;

typedef struct {
    fw_tref_t in, out;
    uint32_t rows, depth;
    int32_t input_multiplier, input_left_shift, diff_min;
    uint8_t out_dtype; /* FW_INT8 or FW_INT16 */
} fw_softmax_t;

#define FW_ADD_MAX_DIMS 6
typedef struct {
    fw_tref_t a, b, out;
    uint32_t count;
    uint8_t dims; /* 0: same shapes, flat; else broadcast over out_shape */
    uint32_t out_shape[FW_ADD_MAX_DIMS];
    uint32_t a_stride[FW_ADD_MAX_DIMS], b_stride[FW_ADD_MAX_DIMS]; /* 0 where broadcast */
    int32_t a_offset, b_offset, output_offset;
    int32_t a_multiplier, b_multiplier, output_multiplier;
    int8_t a_shift, b_shift, output_shift;
    uint8_t left_shift;
    int16_t act_min, act_max;
} fw_add_t;

/* QUANTIZE float32 -> int, REQUANTIZE int -> int, DEQUANTIZE int -> float32. */
typedef struct {
    fw_tref_t in, out;
    uint32_t count;
    uint8_t in_dtype, out_dtype;
    float scale;        /* QUANTIZE: output scale; DEQUANTIZE: input scale */
    int32_t zero_point; /* QUANTIZE: output zp; DEQUANTIZE: input zp */
    int32_t in_zero_point, out_zero_point, multiplier; /* REQUANTIZE */
    int8_t shift;
} fw_quant_t;

typedef struct {
    fw_tref_t in, out;
    uint32_t bytes;
} fw_reshape_t;

typedef struct {
    uint8_t kind; /* fw_op_kind */
    const void *params;
} fw_op_t;

typedef struct {
    const char *name;
    const uint8_t *sha256; /* of the .tflite file, 32 bytes */
    uint32_t model_bytes;  /* .tflite file size */
    uint16_t op_count;
    const fw_op_t *ops;
    const uint32_t *op_macs;
    uint16_t buffer_count;
    const fw_buffer_t *buffers;
    const uint32_t *default_offsets;
    uint32_t default_arena_bytes;
    uint8_t input_count, output_count;
    const fw_io_t *inputs, *outputs;
    uint32_t input_bytes, output_bytes;
    uint8_t *arena; /* the static arena, 16-byte aligned */
    uint32_t arena_capacity;
    uint32_t *offsets;      /* RAM: the active plan */
    uint32_t *plan_staging; /* RAM: a PLAN arriving in parts */
    uint64_t *op_ticks;     /* RAM: per-op ticks of the last RUN */
} fw_model_t;

#endif
