"""LLM providers behind one async interface (see ``base.Provider``)."""
