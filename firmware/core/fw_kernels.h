/* INT8 kernels, bit-exact with TFLM's reference kernels (and engines/mcu/kernels). */
#ifndef FW_KERNELS_H
#define FW_KERNELS_H

#include "fw_model.h"

void fw_conv_int8(const fw_conv_t *p, const int8_t *in, int8_t *out);
void fw_depthwise_int8(const fw_conv_t *p, const int8_t *in, int8_t *out);
void fw_fully_connected_int8(const fw_fc_t *p, const int8_t *in, int8_t *out);
void fw_average_pool_int8(const fw_pool_t *p, const int8_t *in, int8_t *out);
void fw_max_pool_int8(const fw_pool_t *p, const int8_t *in, int8_t *out);
void fw_softmax_int8(const fw_softmax_t *p, const int8_t *in, void *out);
void fw_add_int8(const fw_add_t *p, const int8_t *a, const int8_t *b, int8_t *out);
void fw_quantize(const fw_quant_t *p, const float *in, void *out);
void fw_requantize(const fw_quant_t *p, const void *in, void *out);
void fw_dequantize(const fw_quant_t *p, const void *in, float *out);
void fw_copy(void *dst, const void *src, uint32_t n); /* overlap-safe */
void fw_fill(void *dst, uint8_t value, uint32_t n);

#endif
