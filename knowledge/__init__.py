"""The knowledge base: causes, symptoms, checks, switches, log signatures and the method's tree."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import KnowledgeError
from .lazymod import lazy_exports

if TYPE_CHECKING:
    from .loader import load_knowledge
    from .model import Cause, Check, Fix, KnowledgeBase, Signature, Step, Switch, Symptom

# Imported on first use (PEP 562): `from distdoctor.knowledge import i18n` (every command) must
# not pay for the loader and the model (~90 ms: tomllib, dataclasses, the regex guard) when the
# command never loads the knowledge base (stacks, fr, sessions).
_LAZY = {"load_knowledge": ".loader", "Cause": ".model", "Check": ".model", "Fix": ".model",
         "KnowledgeBase": ".model", "Signature": ".model", "Step": ".model", "Switch": ".model",
         "Symptom": ".model"}

__all__ = ["Cause", "Check", "Fix", "KnowledgeBase", "KnowledgeError", "Signature", "Step",
           "Switch", "Symptom", "load_knowledge"]


__getattr__ = lazy_exports(__name__, _LAZY, globals())
