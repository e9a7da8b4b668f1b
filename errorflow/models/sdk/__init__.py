"""What the backends that talk to a model server through a vendor SDK share (anthropic/
and openai/): `backend` the base around the SDK's client and exceptions, `failures` what
a failed HTTP call says in the taxonomy's terms (a status's code, a connection failure's
cause, a Retry-After). Neither imports a vendor's SDK or backend."""
