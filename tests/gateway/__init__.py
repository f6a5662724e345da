"""Gateway tests: the durable buffer, the engine link (reconnect, replay, acks) and an engine killed mid-burst."""
