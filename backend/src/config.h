/*
 * remote-gpud --config FILE: settings from a file, so that a service's
 * command line stays short and the token stays off it (token-file there).
 */
#ifndef BE_CONFIG_H
#define BE_CONFIG_H

/* Replaces "--config FILE" (or "--config=FILE", already split) in *argv with
 * the file's settings, placed before every other argument so that options on
 * the command line override the file. 0, or RG_EXIT_USAGE / 1 after printing
 * why. */
int be_config_expand(int *argc, char ***argv);

#endif
