"""gRPC trainer protocol: daemon, worker handshake, client."""
