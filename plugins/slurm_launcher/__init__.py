"""The Slurm launcher: ``mosaic run … --launcher slurm`` runs the prepared run as a Slurm job."""
