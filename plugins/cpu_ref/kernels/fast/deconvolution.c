/*
 * The fast deconvolution (kernels.h's cr_deconvolution): the output planes
 * of the reference kernel (cr_ref_deconvolve_plane) shared out among
 * threads. Each output is one double sum computed by one thread, so the
 * result is the reference's bit for bit, whatever the thread count.
 */
#include "kernels.h"
#include "parallel.h"
#include "reference.h"

/* The arguments of one deconvolution, shared by its threads. */
typedef struct cr_conv_task {
  const cr_conv_params *params;
  const int64_t *x_shape;
  const float *x;
  const float *w;
  const float *bias;
  const int64_t *y_shape;
  float *y;
} cr_conv_task;

static void deconvolve_planes(void *context, int64_t begin, int64_t end) {
  const cr_conv_task *task = context;
  const int64_t outputs = task->y_shape[1];
  for (int64_t plane = begin; plane < end; ++plane) {
    cr_ref_deconvolve_plane(task->params, task->x_shape, task->x, task->w, task->bias,
                            task->y_shape, task->y, plane / outputs, plane % outputs);
  }
}

void cr_deconvolution(const cr_conv_params *params, const int64_t x_shape[5],
                      const float *x, const float *w, const float *bias,
                      const int64_t y_shape[5], float *y, int num_threads) {
  cr_conv_task task = {params, x_shape, x, w, bias, y_shape, y};
  const int64_t planes = y_shape[0] * y_shape[1];
  const int64_t work = planes * y_shape[2] * y_shape[3] * y_shape[4] *
                       (x_shape[1] / params->num_group) * params->kernel[0] *
                       params->kernel[1] * params->kernel[2];
  cr_parallel_for(cr_threads_for_work(num_threads, (double)work, 1), planes,
                  deconvolve_planes, &task);
}
