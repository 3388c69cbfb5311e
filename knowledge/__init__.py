"""The knowledge base: causes, symptoms, checks, switches, log signatures and the method's tree."""
from __future__ import annotations

from .errors import KnowledgeError
from .loader import load_knowledge
from .model import Cause, Check, Fix, KnowledgeBase, Signature, Step, Switch, Symptom

__all__ = ["Cause", "Check", "Fix", "KnowledgeBase", "KnowledgeError", "Signature", "Step",
           "Switch", "Symptom", "load_knowledge"]
