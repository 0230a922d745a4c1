# systemd units (see configure's --with-systemdsystemunitdir and
# --with-systemduserunitdir): the sockets as they are, the services with
# the installed cordon's path. tests/integration/systemd-units.sh runs
# systemd-analyze verify on them.
SYSTEMD_SERVICES = systemd/cordon.service systemd/cordon-ws.service systemd/user/cordon.service
SYSTEMD_SOCKETS = systemd/cordon.socket systemd/cordon-ws.socket systemd/user/cordon.socket
EXTRA_DIST += systemd/cordon.service.in systemd/cordon-ws.service.in \
	systemd/user/cordon.service.in
CLEANFILES += $(SYSTEMD_SERVICES)
noinst_DATA = $(SYSTEMD_SERVICES)

gen_systemd_unit = $(AM_V_GEN)$(MKDIR_P) $(@D) && \
	sed -e 's|@bindir[@]|$(bindir)|g' $(srcdir)/$@.in > $@.tmp && mv $@.tmp $@
systemd/cordon.service: $(srcdir)/systemd/cordon.service.in Makefile
	$(gen_systemd_unit)
systemd/cordon-ws.service: $(srcdir)/systemd/cordon-ws.service.in Makefile
	$(gen_systemd_unit)
systemd/user/cordon.service: $(srcdir)/systemd/user/cordon.service.in Makefile
	$(gen_systemd_unit)

if SYSTEMD_SYSTEM_UNITS
systemdsystemunit_DATA = systemd/cordon.service systemd/cordon-ws.service
dist_systemdsystemunit_DATA = systemd/cordon.socket systemd/cordon-ws.socket
endif
if SYSTEMD_USER_UNITS
systemduserunit_DATA = systemd/user/cordon.service
dist_systemduserunit_DATA = systemd/user/cordon.socket
endif
