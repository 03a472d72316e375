/*
 * configure() of mlu_sim (mxnet_acc.h section 9). Keys:
 *   "query" = "keys"     the keys below
 *           = "ops"      "name:version" of every operator (aliases too)
 *           = "version"  the plugin's version
 *           = "stats"    the card's statistics: sim_time_ns, sim_cycles,
 *                        launches, instructions, dram_bytes,
 *                        host_device_bytes, host_device_copies,
 *                        host_device_time_ns, compiles, compile_time_ns
 *           = "params"   every cost-model parameter (cost.h)
 *           = "memory"   allocations, bytes_in_use, dram_bytes of the card
 *   "reset_stats" = "1"  zeroes the card's statistics
 *   "model_info" = <id>  what loading made of a model: segments, operators,
 *                        kernels, instructions, folded_batchnorms,
 *                        fused_epilogues, resident_values, spilled_values,
 *                        aliased_values, sram_words, const_bytes,
 *                        scratch_bytes
 *   "export_model" = <id>, "path" = <file>
 *                        writes loaded model id (on this device) to file
 *                        as an offline model (model_file.h); answers
 *                        "exported" = its size in bytes
 *   "import_model" = <id>, "path" = <file>
 *                        loads an offline model under the new id on this
 *                        device without compiling; answers "imported" = id
 *   <parameter> = <value> sets one cost-model parameter of the card and
 *                        answers it (dram_bytes only on an idle card)
 */
#ifndef MLU_SIM_CONFIGURE_H_
#define MLU_SIM_CONFIGURE_H_

int mlu_configure(int dev_id, const char *const *in_keys, const char *const *in_vals, int num_in,
                  const char *const **out_keys, const char *const **out_vals, int *num_out);

#endif /* MLU_SIM_CONFIGURE_H_ */
