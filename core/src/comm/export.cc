// libplexus.so is plexus_core linked whole; this file only gives the shared library a source of its own.
