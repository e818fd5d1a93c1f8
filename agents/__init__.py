"""The LLM side: litellm adapter, model families, agent tools, prompts and schemas."""
