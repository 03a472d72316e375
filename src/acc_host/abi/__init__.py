"""The ABI layer: the host's side of ``mxnet_acc.h``.

The cffi declarations read from the header (:mod:`.header`), tensor
descriptors (:mod:`.tensor`), one loaded library and its entry points
(:mod:`.library`), device memory (:mod:`.memory`), models compiled by a
plugin (:mod:`.loaded_model`), the one-operator executor of imperative mode
(:mod:`.operator_executor`), the releases the garbage collector asks for
(:mod:`.releases`) and the operator versions the host passes
(:mod:`.operator_versions`). It knows nothing of registries, graphs or
arrays: the layers above hand it what it needs.
"""
