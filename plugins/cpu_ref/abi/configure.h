/*
 * configure() of cpu_ref (see mxnet_acc.h and docs/plugin_guide.md): keys
 * num_threads, kernels, query, export_model, import_model and path.
 */
#ifndef CPU_REF_CONFIGURE_H_
#define CPU_REF_CONFIGURE_H_

#include "mxnet_acc.h"

/* configure() on device dev_id; the answers stay valid until the next call. */
int cr_configure(const char *const *in_keys, const char *const *in_vals, int num_in, int dev_id,
                 const char *const **out_keys, const char *const **out_vals, int *num_out);

#endif /* CPU_REF_CONFIGURE_H_ */
