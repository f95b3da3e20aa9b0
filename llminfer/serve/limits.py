"""How long the toy server waits for a client and for itself: one place for the time limits
that the command line (``run``) offers as defaults and the app (``app``) enforces.
"""

#: Seconds a client has for its request line and headers, from the connection's start or the
#: previous answer's end (also how long an idle kept-alive connection stays open; uvicorn's
#: default under vLLM is 5 s): a slow or partial header cannot hold a connection open.
HEADER_TIMEOUT_S = 5.0
#: Seconds a client has to send a request body once its headers are in.
BODY_TIMEOUT_S = 10.0
#: Seconds a shutdown waits for requests in flight to send their error (and ``[DONE]``).
SHUTDOWN_DEADLINE_S = 3.0
