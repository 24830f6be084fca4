"""losscc: compile loss-function specs into MindSpore and PaddlePaddle source.

Pipeline (one module per stage): :mod:`spec` (YAML -> validated Spec),
:mod:`parse` (formula -> typed SymPy IR), :mod:`rewrites` (stable forms),
:mod:`guards` and :mod:`specialise` (guards, masks; all run as rule bundles by :mod:`passes`),
:mod:`lower` (IR -> backend statements, with :mod:`backends` op tables),
:mod:`render` (Jinja2 templates -> text), :mod:`emit` (atomic files, check).
:mod:`reference` and :mod:`verify` check the output; only :mod:`verify` imports
the frameworks.
"""

__version__ = "0.1.0"
