"""The plugins layer: which accelerator libraries are loaded, and from where.

The registry of loaded libraries (:mod:`.registry`), discovery at import
(:mod:`.discovery`), probing a library in a child process first
(:mod:`.probe`), the ``acc_host.plugins`` entry-point group
(:mod:`.entry_points`), whether a file may be loaded at all
(:mod:`.trust`), and the SDK plugins compile against (:mod:`.sdk`).

Kept empty of imports: the probe's child process imports :mod:`.probe`
alone.
"""
