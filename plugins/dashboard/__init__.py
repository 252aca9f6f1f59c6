"""MOSAIC dashboard: ``mosaic serve``, a live web page of every run on this machine.

The server (:mod:`mosaic_dashboard.app`) reads run directories, live frames through
the frame-source hook (``mosaic_frame_source``: FastLane's segments) and, when one is configured, the trainer daemon through
its gRPC client. starlette, uvicorn and sse-starlette (the ``[web]`` extra) are imported only
when the command runs, so loading the plugin stays cheap.
"""
