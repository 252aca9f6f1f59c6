"""MOSAIC's Ray launcher: ``mosaic run … --ray-address HOST:PORT`` runs the job on a node of an
existing Ray cluster as a normal supervised ``mosaic run`` there, relaying its events here.
Ray is imported only when a run uses the launcher (the ``[ray]`` extra)."""
