/* systemd's readiness notification (sd_notify(3)), for services of
 * Type=notify: `systemctl start` returns once the service answers, so a
 * script that starts it and calls it at once is not refused. */
#ifndef AH_CORE_NOTIFY_H
#define AH_CORE_NOTIFY_H

/* Sends "READY=1" to the socket named by NOTIFY_SOCKET, then drops the
 * variable (children are not the service). Nothing without it: not run by
 * systemd, or by a unit of another type. Best effort: no error to act on. */
void ah_notify_ready(void);

#endif
