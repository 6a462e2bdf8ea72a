/* Running a compiled-in model over its one arena, and the plan it runs with. */
#ifndef FW_EXEC_H
#define FW_EXEC_H

#include "fw_model.h"

/* The compiled-in plan becomes the active one. */
void fw_exec_reset(const fw_model_t *m);

/* Address of an operator's tensor under the active plan. */
void *fw_exec_tensor(const fw_model_t *m, fw_tref_t ref);

/* Run every operator in order; per-op ticks go to m->op_ticks. Returns the total ticks. */
uint64_t fw_exec_run(const fw_model_t *m);

/* Copy bytes [offset, offset + n) of the concatenated graph inputs (write) or outputs
 * (read) from / to `data`. The caller checks the range. */
void fw_exec_write_inputs(const fw_model_t *m, uint32_t offset, const uint8_t *data,
                          uint32_t n);
void fw_exec_read_outputs(const fw_model_t *m, uint32_t offset, uint8_t *data, uint32_t n);

/* Do buffers i and j overlap in time (both live at some step)? In memory (offsets)? */
int fw_exec_live_together(const fw_model_t *m, uint32_t i, uint32_t j);
int fw_exec_share_bytes(const fw_model_t *m, const uint32_t *offsets, uint32_t i, uint32_t j);

#endif
