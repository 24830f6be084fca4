"""losscc: compile loss-function specs into deep-learning framework source, one backend each.

Pipeline (one module per stage): :mod:`spec` (YAML -> validated Spec),
:mod:`parse` (formula -> typed SymPy IR), :mod:`rewrites` (stable forms),
:mod:`guards` and :mod:`specialise` (guards, masks; all run as rule bundles by :mod:`passes`),
:mod:`lower` (IR -> backend statements, with the op tables of :mod:`backends`),
:mod:`render` (Jinja2 templates -> text), :mod:`emit` (atomic files, check).
:mod:`reference` and :mod:`verify` check the output; only :mod:`verify` imports
the frameworks, through the backends' runners.
"""

__version__ = "0.1.0"
