/*
 * cmds.h — the subcommands of the `pinfer` command, one file each.
 * Each takes the arguments after the subcommand name (argv[0] is the
 * subcommand) and returns the process exit status.
 */
#ifndef PI_TOOLS_CMDS_H
#define PI_TOOLS_CMDS_H

int cmd_inspect(int argc, char **argv);
int cmd_bench_kernels(int argc, char **argv);
int cmd_bench_io(int argc, char **argv);
int cmd_hwprobe(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_gen_model(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_train_predictor(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_quantize(int argc, char **argv);

#endif
