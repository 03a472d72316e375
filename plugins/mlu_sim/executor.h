/*
 * Imperative mode (accGetExecutor): one MXNet operator as one CNML BaseOp,
 * compiled on its own and launched on its own, as the seed's imperative
 * mode does, so that the two modes can be compared on the same model.
 *
 * The BaseOp is created (and its shapes checked) by accGetExecutor; it is
 * compiled at its first forward, when the parameter values (weights) are
 * known: they arrive as inputs in device memory. The executor keeps a copy
 * of the parameter bytes it compiled with and compares the new inputs on
 * every forward; different values (the host caches executors by signature,
 * so one executor may serve several layers) are bound and compiled again.
 * Each forward enqueues one launch on the executor's queue and syncs.
 */
#ifndef MLU_SIM_EXECUTOR_H_
#define MLU_SIM_EXECUTOR_H_

#include "mxnet_acc.h"

int mlu_executor_create(const char *op_name, const MXTensor *inputs, const MXTensor *outputs,
                        int num_in, int num_out, const char *const *attr_keys,
                        const char *const *attr_vals, int num_attrs, int dev_id,
                        MXAccExecutor **executor);

#endif /* MLU_SIM_EXECUTOR_H_ */
