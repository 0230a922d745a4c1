# Shell completions (see configure's --with-bash-completion-dir,
# --with-zsh-completion-dir and --with-fish-completion-dir);
# tests/integration/completion.sh keeps their option lists equal to cordon's
# option tables.
if BASH_COMPLETION
dist_bashcompletion_DATA = completions/bash/cordon
endif
if ZSH_COMPLETION
dist_zshcompletion_DATA = completions/zsh/_cordon
endif
if FISH_COMPLETION
dist_fishcompletion_DATA = completions/fish/cordon.fish
endif
