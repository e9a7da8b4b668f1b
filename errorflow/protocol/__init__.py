"""The message contract: the envelope and its signature, topics, the result payload,
claims and answers, stop reasons, events and control actions. Everything that crosses
the bus is written and read here; it imports only `core`."""
