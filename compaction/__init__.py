"""Session memory within a token budget: pure logic, no network, no database."""

from compaction.context import (
    MIN_BUDGET,
    Budget,
    BuiltContext,
    ContextTooLarge,
    build_context,
    plan_eviction,
)
from compaction.extractive import ExtractiveSummarizer
from compaction.ledger import Ledger
from compaction.recall import excerpt, known_sentences, query_terms
from compaction.render import MemoryRenderer, fit_memory
from compaction.state import Fact, Memory, Message, Reversal, units
from compaction.summarizer import Completion, Extractive, LLMSummarizer, Summarizer, Summary
from compaction.tokens import TiktokenCounter, TokenCounter, message_tokens, prompt_tokens

__all__ = [
    "MIN_BUDGET",
    "Budget",
    "BuiltContext",
    "Completion",
    "ContextTooLarge",
    "Extractive",
    "ExtractiveSummarizer",
    "Fact",
    "LLMSummarizer",
    "Ledger",
    "Memory",
    "MemoryRenderer",
    "Message",
    "Reversal",
    "Summarizer",
    "Summary",
    "TiktokenCounter",
    "TokenCounter",
    "build_context",
    "excerpt",
    "fit_memory",
    "known_sentences",
    "message_tokens",
    "plan_eviction",
    "prompt_tokens",
    "query_terms",
    "units",
]
