import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useNavigate, useParams } from 'react-router';
import { api, unwrap } from '../../api/client';
import { ErrorBox, formatDate, Loading, MailFrame, PageHeader, Status } from '../../components/ui';
import { Progress } from '../shared/Progress';
import { textAsHtml } from '../shared/placeholders';
import { describeSchedule, resolveSchedule } from './schedule';

const COUNTERS = ['total', 'sent', 'delivered', 'opened', 'clicked', 'bounced', 'hardBounced', 'complained', 'unsubscribed'] as const;
const LABELS: Record<(typeof COUNTERS)[number], string> = {
  total: 'Recipients', sent: 'Sent', delivered: 'Delivered', opened: 'Opened', clicked: 'Clicked', bounced: 'Bounced',
  hardBounced: 'Hard bounces', complained: 'Complaints', unsubscribed: 'Unsubscribed',
};

export default function CampaignDetail() {
  const { id = '' } = useParams();
  const qc = useQueryClient();
  const navigate = useNavigate();
  const path = { params: { path: { campaignId: id } } };
  const [scheduleText, setScheduleText] = useState('');
  const campaign = useQuery({
    queryKey: ['campaign', id],
    queryFn: () => unwrap(api.GET('/v1/campaigns/{campaignId}', path)),
    // Live progress while it sends or waits for its time. COMPLETED means every email was handed
    // over; `sent` follows the mail itself, so polling goes on until it reaches the total, then slows
    // down for the delivery counters.
    refetchInterval: (q) => {
      const d = q.state.data;
      if (!d) return false;
      if (d.status === 'SENDING' || d.status === 'SCHEDULED') return 1_500;
      if (d.status === 'COMPLETED') return d.sent < d.total ? 1_500 : 10_000;
      return false;
    },
  });
  const changed = () => {
    void qc.invalidateQueries({ queryKey: ['campaign', id] });
    void qc.invalidateQueries({ queryKey: ['campaigns'] });
  };
  const pause = useMutation({ mutationFn: () => unwrap(api.POST('/v1/campaigns/{campaignId}/pause', path)), onSuccess: changed });
  const resume = useMutation({ mutationFn: () => unwrap(api.POST('/v1/campaigns/{campaignId}/resume', path)), onSuccess: changed });
  const schedule = useMutation({
    mutationFn: (scheduledAt: string | undefined) => unwrap(api.POST('/v1/campaigns/{campaignId}/schedule', { ...path, body: scheduledAt ? { scheduledAt } : {} })),
    onSuccess: () => {
      setScheduleText('');
      changed();
    },
  });
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/v1/campaigns/{campaignId}', path)),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['campaigns'] });
      navigate('/campaigns');
    },
  });

  if (campaign.isPending) return <Loading />;
  if (campaign.error)
    return (
      <>
        <PageHeader title="Campaign" />
        <ErrorBox error={campaign.error} />
        <Link to="/campaigns">Back to campaigns</Link>
      </>
    );
  const c = campaign.data;
  const resolved = resolveSchedule(scheduleText);
  const canPause = c.status === 'SENDING' || c.status === 'SCHEDULED';

  return (
    <>
      <PageHeader title={c.name}>
        {canPause ? (
          <button type="button" onClick={() => pause.mutate()} disabled={pause.isPending}>
            Pause
          </button>
        ) : null}
        {c.status === 'PAUSED' ? (
          <button type="button" className="primary" onClick={() => resume.mutate()} disabled={resume.isPending}>
            Resume
          </button>
        ) : null}
        {c.status === 'DRAFT' ? (
          <button type="button" className="primary" onClick={() => schedule.mutate(undefined)} disabled={schedule.isPending}>
            Send now
          </button>
        ) : null}
        <button
          type="button"
          className="danger"
          onClick={() => {
            if (window.confirm(`Delete the campaign ${c.name} and all its email records?`)) remove.mutate();
          }}
        >
          Delete
        </button>
      </PageHeader>
      <p>
        <Link to="/campaigns">Back to campaigns</Link>
      </p>
      <p role="status" aria-live="polite">
        Status: <Status value={c.status} />
        {c.scheduledAt && c.status === 'SCHEDULED' ? <span> for {formatDate(c.scheduledAt)}</span> : null}
      </p>
      {c.status === 'PAUSED' && c.pausedReason ? (
        <div className="notice" role="status">
          Paused: {c.pausedReason}
        </div>
      ) : null}
      <ErrorBox error={pause.error ?? resume.error ?? schedule.error ?? remove.error} />

      <Progress
        label="Sending progress"
        value={c.sent}
        max={c.total}
        detail={c.status === 'COMPLETED' ? (c.sent < c.total ? 'all handed over, sending' : 'completed') : c.status.toLowerCase()}
      />
      {c.total > 0 ? <Progress label="Delivered" value={c.delivered} max={c.total} /> : null}

      <div className="cards" style={{ marginTop: '1rem' }}>
        {COUNTERS.map((k) => (
          <div className="card" key={k}>
            <div className="muted">{LABELS[k]}</div>
            <div className="value" data-testid={`counter-${k}`}>
              {c[k].toLocaleString()}
            </div>
          </div>
        ))}
      </div>

      {c.status === 'DRAFT' || c.status === 'SCHEDULED' || c.status === 'PAUSED' ? (
        <>
          <h2>{c.status === 'DRAFT' ? 'Schedule' : 'Reschedule'}</h2>
          <form
            className="row"
            aria-label="Schedule"
            onSubmit={(e) => {
              e.preventDefault();
              schedule.mutate(scheduleText.trim());
            }}
          >
            <label>
              Send at (ISO 8601 or words)
              <input required value={scheduleText} placeholder="tomorrow at 9am" onChange={(e) => setScheduleText(e.target.value)} aria-describedby="resched-time" />
            </label>
            <button type="submit" disabled={schedule.isPending || !resolved}>
              Schedule
            </button>
          </form>
          <p id="resched-time" className="muted" role="status">
            {scheduleText.trim() ? (resolved ? describeSchedule(resolved) : 'Not a date or time the platform understands') : ''}
          </p>
        </>
      ) : null}

      <h2>Message</h2>
      <dl className="props">
        <dt>From</dt>
        <dd>{c.from}</dd>
        <dt>Subject</dt>
        <dd>{c.subject}</dd>
        {c.previewText ? (
          <>
            <dt>Preview text</dt>
            <dd>{c.previewText}</dd>
          </>
        ) : null}
        <dt>Contact book</dt>
        <dd>{c.contactBookId ? <Link to={`/contacts/${encodeURIComponent(c.contactBookId)}`}>open the book</Link> : '—'}</dd>
        <dt>Batches</dt>
        <dd>
          {c.batchSize.toLocaleString()} emails every {c.batchWindowMinutes} min
        </dd>
        <dt>Created</dt>
        <dd>{formatDate(c.createdAt)}</dd>
      </dl>
      <MailFrame title="Campaign body (placeholders unfilled)" html={c.html ?? textAsHtml(c.content ?? '')} />
    </>
  );
}
