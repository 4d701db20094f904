package bpf

//go:generate go tool bpf2go -cc clang-19 -strip llvm-strip-19 -target bpfel -cflags "-O2 -g -Wall -Werror" -type synth_hdr -type synth_file_key -type synth_build_id -type synth_pending -type synth_walk -type synth_mmap2_next -type synth_pending_rec -type synth_unmap -type synth_mmap2 -type synth_limit -type synth_cfg -type synth_record_type -type synth_walk_status -type synth_unmap_what -type unmap_call_kind Synth synth.bpf.c
