import { Empty, PageHeader } from '../../components/ui';

export default function Emails() {
  return (
    <>
      <PageHeader title="Emails" />
      <Empty title="Coming in stage 1" />
    </>
  );
}
