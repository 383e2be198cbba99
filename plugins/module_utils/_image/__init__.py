"""Engine images: specs, builds, the docker CLI, and moving an image node to node."""
