int cd_fakefs_placeholder;
