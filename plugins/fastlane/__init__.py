"""MOSAIC fastlane plugin."""
