/*
 * RNN steps of a loaded model: when the node's parameter vector is a
 * weight (a graph variable, as the ONNX importer makes it) and the data
 * is float32 on the fast kernels, its weights (the recurrent ones
 * transposed in column blocks, the input ones for the GEMM) are packed once
 * here, when the model is loaded and again when infer() is given new
 * weights, and every infer() runs from that packing (cr_rnn_run_packed).
 * A vector computed in the graph (gluon's _rnn_param_concat of the
 * weights) is packed by the kernel at each call instead.
 */
#include <stdlib.h>

#include "model_impl.h"
#include "status.h"
#include "tensor.h"

int prepare_rnn_steps(cr_model *model) {
  if (model->kernels != CR_KERNELS_FAST) return MX_ACC_OK;
  cr_entry_facts facts = {0};
  int status = MX_ACC_OK;
  for (size_t s = 0; s < model->num_steps && status == MX_ACC_OK; ++s) {
    cr_step *step = &model->steps[s];
    if (!step_is(step, "RNN") || step->params.in_dtypes[0] != kFloat32) continue;
    if (facts.is_weight == NULL) {
      status = gather_facts(model, &facts);
      if (status != MX_ACC_OK) break;
    }
    if (!facts.is_weight[step->inputs[1]]) continue;
    const cr_rnn_params *p = &step->params.u.rnn;
    const int64_t features = (int64_t)model->entries[step->inputs[0]].shape.dims[2];
    if (step->rnn_packed == NULL) step->rnn_packed = calloc(1, sizeof *step->rnn_packed);
    if (step->rnn_packed == NULL ||
        cr_rnn_packing_update(p, features, model->entries[step->inputs[1]].data,
                              step->rnn_packed) != 0) {
      status = acc_fail(MX_ACC_ERR_OUT_OF_MEMORY, "RNN step %zu: its packed weights", s);
      break;
    }
  }
  free_facts(&facts);
  return status;
}
