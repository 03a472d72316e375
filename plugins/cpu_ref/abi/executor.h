/*
 * Imperative mode of cpu_ref: one operator bound to its attributes, shapes
 * and device, behind the MXAccExecutor object of mxnet_acc.h.
 */
#ifndef CPU_REF_EXECUTOR_H_
#define CPU_REF_EXECUTOR_H_

#include "mxnet_acc.h"

/* See accGetExecutor(). */
int cr_executor_create(const char *op_name, const MXTensor *inputs, const MXTensor *outputs,
                       int num_in, int num_out, const char *const *attr_keys,
                       const char *const *attr_vals, int num_attrs, int dev_id,
                       MXAccExecutor **executor);

#endif /* CPU_REF_EXECUTOR_H_ */
