//! `keel schedule add|list|remove|run|pause|resume`: the command line of scheduled tasks.
