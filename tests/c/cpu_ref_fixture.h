/*
 * What the cpu_ref C tests share: a small annotated conv net (graph JSON,
 * weight buffers, helpers), besides check.h. Included by one test program
 * each, so the static definitions are private to it.
 */
#ifndef TESTS_C_CPU_REF_FIXTURE_H_
#define TESTS_C_CPU_REF_FIXTURE_H_

#include <stdint.h>

#include "check.h"
#include "mxnet_acc.h"

/* data -> Convolution -> relu -> max Pooling -> Flatten -> FullyConnected -> softmax */
static const char kGraph[] =
    "{\"nodes\":["
    VAR("data", "[1,2,5,5]", "data") ","
    VAR("conv_w", "[3,2,3,3]", "weight") ","
    VAR("conv_b", "[3]", "weight") ","
    NODE("Convolution", "conv", OUT("[1,3,5,5]") ",\"kernel\":\"(3, 3)\",\"pad\":\"(1, 1)\","
         "\"num_filter\":\"3\"", "[0,0,0],[1,0,0],[2,0,0]") ","
    NODE("Activation", "relu", OUT("[1,3,5,5]") ",\"act_type\":\"relu\"", "[3,0,0]") ","
    NODE("Pooling", "pool", OUT("[1,3,2,2]") ",\"kernel\":\"(2, 2)\",\"stride\":\"(2, 2)\"",
         "[4,0,0]") ","
    NODE("Flatten", "flat", OUT("[1,12]"), "[5,0,0]") ","
    VAR("fc_w", "[4,12]", "weight") ","
    VAR("fc_b", "[4]", "weight") ","
    NODE("FullyConnected", "fc", OUT("[1,4]") ",\"num_hidden\":\"4\"",
         "[6,0,0],[7,0,0],[8,0,0]") ","
    NODE("softmax", "prob", OUT("[1,4]"), "[9,0,0]")
    "],\"arg_nodes\":[0,1,2,7,8],\"heads\":[[10,0,0]]}";

static float data[50], conv_w[54], conv_b[3], fc_w[48], fc_b[4];

static void fill(float *values, int count, float scale) { fill_pattern(values, count, scale, 0); }

#endif /* TESTS_C_CPU_REF_FIXTURE_H_ */
