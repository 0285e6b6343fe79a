"""The field's standard beside ours: OpenDP's MST and AIM, registered only when OpenDP is installed."""
